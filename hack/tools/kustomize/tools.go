//go:build tools

// Package tools pins the kustomize CLI hack/build-install-tools.sh builds to render
// config/default.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
