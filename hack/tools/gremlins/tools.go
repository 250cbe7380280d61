//go:build tools

// Package tools pins the gremlins mutation tester hack/mutate.sh builds to measure how
// many mutants of the pure packages the unit tests kill.
package tools

import _ "github.com/go-gremlins/gremlins/cmd/gremlins"
