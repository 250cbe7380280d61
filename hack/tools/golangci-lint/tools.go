//go:build tools

// Package tools pins the golangci-lint CLI hack/build-install-tools.sh builds for
// `make lint` (configured by .golangci.yml at the repository root).
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
