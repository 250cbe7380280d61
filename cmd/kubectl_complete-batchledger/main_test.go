package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMain runs main when the test re-executes itself as the helper.
func TestMain(m *testing.M) {
	if os.Getenv("BE_KUBECTL_COMPLETE") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestHandsTheWordsToThePlugin: kubectl runs the helper with the words after the
// plugin's name; the helper runs `kubectl-batchledger __complete WORDS...` from PATH and
// its answer is the helper's.
func TestHandsTheWordsToThePlugin(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho \"$0 $*\"\n"
	if err := os.WriteFile(filepath.Join(dir, plugin), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "repair", "-n", "ml-team", "ij")
	cmd.Env = append(os.Environ(), "BE_KUBECTL_COMPLETE=1", "PATH="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := filepath.Join(dir, plugin) + " __complete repair -n ml-team ij\n"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}

	// Without the plugin on PATH it says why and fails.
	cmd = exec.Command(os.Args[0], "get", "")
	cmd.Env = append(os.Environ(), "BE_KUBECTL_COMPLETE=1", "PATH="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("succeeded without the plugin on PATH: %s", out)
	}
}
