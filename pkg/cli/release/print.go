package release

import (
	"fmt"
	"io"
	"strings"

	held "batchledger.dev/batchledger/pkg/release"
)

// printRelease writes one line per pod (or Job: noun) released (or that would be, in a
// dry run), gone or released meanwhile by the controller, then a summary line.
func printRelease(w io.Writer, rep *held.Report, noun string) {
	if rep.DryRun {
		for _, p := range rep.Held {
			fmt.Fprintf(w, "would release %s %s\n", noun, p)
		}
	}
	suffix := ""
	if rep.ServerDryRun {
		suffix = " (server dry run)"
	}
	for _, p := range rep.Released {
		fmt.Fprintf(w, "released %s %s%s\n", noun, p, suffix)
	}
	for _, p := range rep.AlreadyGone {
		fmt.Fprintf(w, "%s %s was already gone\n", noun, p)
	}
	for _, p := range rep.AlreadyReleased {
		fmt.Fprintf(w, "%s %s was already released\n", noun, p)
	}
	where := "in namespace " + rep.Namespace
	if rep.Namespace == "" {
		where = "in any namespace"
	}
	if len(rep.Held) == 0 {
		fmt.Fprintf(w, "no %s is held by batchledger %s\n", noun, where)
		return
	}
	if rep.Namespace == "" {
		where = "across all namespaces"
	}
	if rep.DryRun {
		fmt.Fprintf(w, "would release %s held by batchledger %s (dry run: nothing changed)\n", count(len(rep.Held), noun), where)
		return
	}
	summary := []string{fmt.Sprintf("released %s held by batchledger %s%s", count(len(rep.Released), noun), where, suffix)}
	if n := len(rep.AlreadyGone); n > 0 {
		summary = append(summary, fmt.Sprintf("%d already gone", n))
	}
	if n := len(rep.AlreadyReleased); n > 0 {
		summary = append(summary, fmt.Sprintf("%d already released", n))
	}
	if n := len(rep.Errors); n > 0 {
		summary = append(summary, fmt.Sprintf("%d still held", n))
	}
	fmt.Fprintln(w, strings.Join(summary, "; "))
}

// count is "1 pod", "2 pods".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
