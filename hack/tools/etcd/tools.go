//go:build tools

// Package tools pins the etcd server hack/build-binaries.sh builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
