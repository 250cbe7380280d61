//go:build tools

// Package tools pins CoreDNS, built from its module into the kind node image because
// nothing can be pulled from a registry here.
package tools

import _ "github.com/coredns/coredns"
