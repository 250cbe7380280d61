// Package output holds what the verbs' printers share: words that agree with a count,
// and what the output stream is (a terminal, how wide, whether to colour it).
package output

import (
	"io"
	"os"

	"github.com/fatih/color"
	"golang.org/x/term"
)

// DefaultWidth is the width of a frame or map when the terminal does not say.
const DefaultWidth = 100

// Plural is one when n is 1, many otherwise.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// DescribeTerminal says whether w is a terminal, its width, and whether to colour it:
// only a terminal, and not when NO_COLOR or TERM=dumb ask otherwise (fatih/color reads both).
func DescribeTerminal(w io.Writer) (tty bool, width int, colour bool) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, DefaultWidth, false
	}
	width = DefaultWidth
	if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
		width = cols
	}
	return true, width, !color.NoColor
}
