//go:build tools

// Package tools pins the helm CLI hack/build-install-tools.sh builds to lint and render
// charts/batchledger.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
