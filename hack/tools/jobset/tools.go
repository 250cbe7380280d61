//go:build tools

// Package tools pins the JobSet manager hack/build-binaries.sh builds.
package tools

import _ "sigs.k8s.io/jobset"
