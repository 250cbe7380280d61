//go:build tools

// Package tools pins the Kubeflow Trainer controller manager hack/build-binaries.sh builds.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
