// Package kwok holds the kwok Stage configuration that makes kwok act as the kubelet of the
// local control plane's fake GPU nodes, embedded so that every binary that starts kwok uses
// the same stages.
//
// Pod lifecycle under these stages:
//
//   - bound to a fake node → Running at once, and stays Running;
//   - annotation kwok.batchledger.dev/exit-code (+ optional
//     kwok.batchledger.dev/termination-message) → every container terminated with that exit
//     code and message, reason Completed/Error, phase Succeeded/Failed;
//   - pod template annotation kwok.batchledger.dev/auto-exit-code (+ optional
//     kwok.batchledger.dev/auto-exit-delay, a Go duration) → the same, by itself;
//   - deletion → containers killed (exit 137), phase Failed, then removed once no finalizer
//     is left (finalizers are never removed by kwok);
//   - annotation kwok.batchledger.dev/unmanaged=true → kwok never writes the pod's status.
//
// It lives in internal/testsupport (see there why) beside localcluster, which starts kwok
// with these stages.
package kwok

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

// Annotations understood by the stages.
const (
	// ExitCodeAnnotation finishes a Running pod with the given exit code.
	ExitCodeAnnotation = "kwok.batchledger.dev/exit-code"
	// TerminationMessageAnnotation is the termination message reported with the exit code.
	TerminationMessageAnnotation = "kwok.batchledger.dev/termination-message"
	// MessageContainerAnnotation, on a pod, names the only container that reports the
	// termination message when the pod finishes; the others report "<name>: shutting
	// down", as a sidecar would.
	MessageContainerAnnotation = "kwok.batchledger.dev/message-container"
	// AutoExitCodeAnnotation, on a pod template, finishes every pod with that exit code.
	AutoExitCodeAnnotation = "kwok.batchledger.dev/auto-exit-code"
	// AutoExitDelayAnnotation delays AutoExitCodeAnnotation by a Go duration ("2s").
	AutoExitDelayAnnotation = "kwok.batchledger.dev/auto-exit-delay"
	// UnmanagedAnnotation set to "true" keeps kwok from writing the pod's status.
	UnmanagedAnnotation = "kwok.batchledger.dev/unmanaged"
)

//go:embed *.yaml
var stages embed.FS

// Stages returns every stage of this directory as one multi-document YAML stream, in file
// name order, ready to be passed to kwok with --config.
func Stages() []byte {
	names, err := fs.Glob(stages, "*.yaml")
	if err != nil {
		panic(err) // the pattern is constant
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		data, err := stages.ReadFile(n)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		b.WriteString("---\n")
		b.Write(data)
		if !strings.HasSuffix(string(data), "\n") {
			b.WriteString("\n")
		}
	}
	return []byte(b.String())
}
