//go:build tools

// Package tools pins the kwok binaries hack/build-binaries.sh builds.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
