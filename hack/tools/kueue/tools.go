//go:build tools

// Package tools pins the Kueue manager hack/build-binaries.sh builds.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
