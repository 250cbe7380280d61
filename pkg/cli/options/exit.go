package options

import (
	"errors"
	"fmt"
	"io"
)

// Exit codes of the plugin.
const (
	// ExitOK means the command did what was asked.
	ExitOK = 0
	// ExitError means the command failed; the message names the object concerned.
	ExitError = 1
	// ExitNotAccepted is returned by `explain --exit-code` when a batch explained is not
	// Accepted, so that a CI pipeline can gate on the verdict without parsing output; and
	// by `watch` when a batch can no longer be accepted without repair.
	ExitNotAccepted = 2
)

// CodeError is an error that carries the process exit code it should end with.
type CodeError struct {
	Code int
	Err  error
}

func (e *CodeError) Error() string { return e.Err.Error() }

func (e *CodeError) Unwrap() error { return e.Err }

// ErrNotAccepted ends `explain --exit-code` with ExitNotAccepted; the explanation already
// said why, so nothing more is printed.
var ErrNotAccepted = &CodeError{Code: ExitNotAccepted, Err: errors.New("the batch is not Accepted")}

// ExitCodeOf maps a command error to the exit code, printing the message of real errors.
func ExitCodeOf(err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var ce *CodeError
	if errors.As(err, &ce) {
		if ce != ErrNotAccepted {
			fmt.Fprintln(stderr, "error:", ce.Err)
		}
		return ce.Code
	}
	fmt.Fprintln(stderr, "error:", err)
	return ExitError
}
