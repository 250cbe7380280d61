// Command kubectl_complete-batchledger completes `kubectl batchledger ...` in kubectl's
// own shell completion: kubectl (1.26 and later) runs kubectl_complete-<plugin> from PATH
// with the words typed after the plugin's name, and prints its answer. This one hands the
// words to the plugin's cobra completion, `kubectl-batchledger __complete`, found on PATH
// beside it, so that both complete the same.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// plugin is the plugin's executable, as kubectl finds it.
const plugin = "kubectl-batchledger"

func main() {
	path, err := exec.LookPath(plugin)
	if err != nil {
		// A shell completion prints nothing useful on failure; say why on stderr.
		fmt.Fprintf(os.Stderr, "kubectl_complete-batchledger: %v\n", err)
		os.Exit(1)
	}
	args := append([]string{plugin, "__complete"}, os.Args[1:]...)
	if err := syscall.Exec(path, args, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "kubectl_complete-batchledger: running %s: %v\n", path, err)
		os.Exit(1)
	}
}
