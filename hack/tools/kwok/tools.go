//go:build tools

// Package tools pins the kwok binary hack/build-binaries.sh builds (kwokctl is not needed:
// the local cluster runs kwok directly).
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
