//go:build tools

// Package tools pins kind, which hack/kind uses as a binary to create and delete the
// e2e cluster; its module also carries the node base files (images/base/files).
package tools

import _ "sigs.k8s.io/kind"
