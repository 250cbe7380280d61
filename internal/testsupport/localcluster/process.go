package localcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one running component. Each runs in its own process group, so stopping it also
// stops anything it spawned, and writes stdout and stderr to its own log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	pidPath string
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// pidRecord is what a pid file holds: enough for `hack/cluster down` (another process) to find
// and verify a component.
type pidRecord struct {
	Name    string   `json:"name"`
	PID     int      `json:"pid"`
	Args    []string `json:"args"`
	LogFile string   `json:"logFile"`
}

// procSpec describes a process to start.
type procSpec struct {
	name string
	args []string // args[0] is the binary
	env  []string // added to this process's environment
	// privateFiles, when not empty, runs the process in a private mount namespace in which
	// these absolute paths (key) show the given files (value); see mountns.go.
	privateFiles map[string]string
}

// startProcess starts spec with its output in <state>/logs/<name>.log and records a pid file.
// With detach the process outlives this one (own session, no parent-death signal);
// otherwise the kernel kills it if this process dies, whatever the cause (panic, test
// timeout, SIGKILL), so nothing is left running after a test binary exits.
func (c *Cluster) startProcess(spec procSpec) (*process, error) {
	logPath := filepath.Join(c.StateDir, "logs", spec.name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy of the descriptor

	args := spec.args
	env := append(os.Environ(), spec.env...)
	// Everything is on loopback; a proxy from the environment must never see that traffic.
	env = append(env, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	attr := &syscall.SysProcAttr{}
	if c.detach {
		attr.Setsid = true
	} else {
		attr.Setpgid = true
		attr.Pdeathsig = syscall.SIGKILL
	}
	if len(spec.privateFiles) > 0 {
		helperArgs, helperEnv, unshare, err := exposeFiles(args, spec.privateFiles, filepath.Join(c.StateDir, spec.name, "mountns"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", spec.name, err)
		}
		if unshare == 0 {
			c.logf("%s: no private mount namespace available; wrote %s on this machine", spec.name, strings.Join(sortedKeys(spec.privateFiles), ", "))
		}
		args = helperArgs
		env = append(env, helperEnv...)
		attr.Unshareflags = unshare
	}

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = attr
	fmt.Fprintf(logFile, "### %s starting: %s\n", time.Now().Format(time.RFC3339), strings.Join(spec.args, " "))
	if err := startOnLockedThread(cmd); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w (log: %s)", spec.name, args[0], err, logPath)
	}
	p := &process{name: spec.name, cmd: cmd, logPath: logPath, pidPath: filepath.Join(c.StateDir, "pids", spec.name+".json")}
	return c.track(p, pidRecord{Name: spec.name, Args: spec.args, LogFile: logPath})
}

// track follows a started process: it waits for it in the background, writes its pid file
// (rec with the process's pid) and adds it to the cluster's processes. A process whose pid
// file cannot be written is killed.
func (c *Cluster) track(p *process, rec pidRecord) (*process, error) {
	p.done = make(chan struct{})
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	rec.PID = p.cmd.Process.Pid
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(p.pidPath, data, 0o644); err != nil {
		_ = p.kill(0)
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// diedError is the error for a component that ended during start-up.
func (p *process) diedError() error {
	_, err := p.exited()
	return fmt.Errorf("%s exited during start-up (%v); its log is %s:\n%s", p.name, err, p.logPath, tail(p.logPath, 15))
}

// kill stops the process group: SIGTERM, then SIGKILL after grace.
func (p *process) kill(grace time.Duration) error {
	pid := p.cmd.Process.Pid
	if grace > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pid)
	}
	_ = os.Remove(p.pidPath)
	return nil
}

// stopGrace is how long components get to exit on SIGTERM before SIGKILL. It is short on
// purpose: the state is thrown away, and kube-apiserver and etcd shut down slowly (seconds,
// or minutes once etcd is gone) for consistency nothing here needs.
const stopGrace = 500 * time.Millisecond

// stopAll stops processes concurrently: all get SIGTERM at once, since nothing needs an
// orderly shutdown and test time matters more.
func stopAll(procs []*process, grace time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.kill(grace)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// spawner starts every child from one OS thread that never exits: the kernel delivers the
// parent-death signal when the *thread* that forked a child ends, and Go may otherwise fork
// from any thread of its pool.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

func startOnLockedThread(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawner.reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd: cmd, errc: errc}
	return <-errc
}

// readPidRecords lists the pid files of a state dir, sorted by component name.
func readPidRecords(stateDir string) ([]pidRecord, error) {
	files, err := filepath.Glob(filepath.Join(stateDir, "pids", "*.json"))
	if err != nil {
		return nil, err
	}
	var recs []pidRecord
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r pidRecord
		if json.Unmarshal(data, &r) == nil && r.PID > 0 {
			recs = append(recs, r)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, nil
}

// alive reports whether the recorded process still runs and is the one recorded: a reused
// pid belongs to another command line, which never mentions this cluster's state dir.
func (r pidRecord) alive(stateDir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.PID))
	if err != nil {
		return false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.PID)); err == nil {
		// A zombie has exited already; it only waits for its parent.
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			return false
		}
	}
	return bytes.Contains(cmdline, []byte(stateDir))
}

// killRecorded stops processes known only by their pid files (those of a detached cluster).
func killRecorded(stateDir string, recs []pidRecord, grace time.Duration) error {
	var live []pidRecord
	for _, r := range recs {
		if r.alive(stateDir) {
			_ = syscall.Kill(-r.PID, syscall.SIGTERM)
			live = append(live, r)
		}
	}
	deadline := time.Now().Add(grace)
	for len(live) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		live = stillAlive(stateDir, live)
	}
	for _, r := range live {
		_ = syscall.Kill(-r.PID, syscall.SIGKILL)
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(live) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		live = stillAlive(stateDir, live)
	}
	var errs []error
	for _, r := range live {
		errs = append(errs, fmt.Errorf("%s (pid %d) is still running after SIGKILL", r.Name, r.PID))
	}
	return errors.Join(errs...)
}

func stillAlive(stateDir string, recs []pidRecord) []pidRecord {
	var out []pidRecord
	for _, r := range recs {
		if r.alive(stateDir) {
			out = append(out, r)
		}
	}
	return out
}

// tail returns the last n lines of a file, for error messages and failure dumps.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Tail returns the last n lines of a log file (or a note saying why it cannot be read).
func Tail(path string, n int) string { return tail(path, n) }
