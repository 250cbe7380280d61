package localcluster

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRestartComponentSIGKILLsTheGroupAndRerunsTheSameCommand: the old process group is
// gone at once (SIGKILL, so a SIGTERM trap never runs), the new process has the same
// command line and environment, appends to the same log and owns the pid file.
func TestRestartComponentSIGKILLsTheGroupAndRerunsTheSameCommand(t *testing.T) {
	c := newTestCluster(t)
	script := `trap 'echo graceful; exit 0' TERM; echo "run $SOAK_MARK"; sleep 60 & wait`
	old, err := c.startProcess(procSpec{name: "worker", args: []string{"/bin/sh", "-c", script}, env: []string{"SOAK_MARK=kept"}})
	if err != nil {
		t.Fatal(err)
	}
	oldPGID := old.cmd.Process.Pid
	time.Sleep(200 * time.Millisecond) // let the shell fork its sleep

	if _, err := c.RestartComponent(t.Context(), "worker"); err != nil {
		t.Fatal(err)
	}
	// Signal 0 to a process group fails with ESRCH once every member is gone (the
	// orphaned sleep is reaped by init a moment after the kill).
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-oldPGID, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("a process of the old group survived the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := old.exited(); !strings.Contains(err.Error(), "killed") {
		t.Errorf("old process ended with %v, want killed by SIGKILL", err)
	}
	var rec pidRecord
	data, err := os.ReadFile(old.pidPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.PID == oldPGID || strings.Join(rec.Args, " ") != "/bin/sh -c "+script {
		t.Errorf("pid file after restart = %+v; want a new pid and the same command line", rec)
	}
	if c.Exited("worker") {
		t.Error("the restarted worker is not running")
	}
	time.Sleep(200 * time.Millisecond) // let it write its first line
	log, _ := os.ReadFile(old.logPath)
	if got := strings.Count(string(log), "\nrun kept\n"); got != 2 || strings.Contains(string(log), "\ngraceful\n") {
		t.Errorf("log shows %d runs with the environment kept (want 2) or a graceful exit:\n%s", got, log)
	}
}

// TestExitedSeesAProcessThatEndedByItself: what the soak's supervisor restarts.
func TestExitedSeesAProcessThatEndedByItself(t *testing.T) {
	c := newTestCluster(t)
	if _, err := c.startProcess(procSpec{name: "short", args: []string{"/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !c.Exited("short") {
		if time.Now().After(deadline) {
			t.Fatal("Exited never reported the ended process")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.Exited("never-started") {
		t.Error("Exited reports a name that never ran")
	}
}
