package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// RestartComponent SIGKILLs a running component — kube-apiserver, kube-controller-manager,
// kube-scheduler, or a Manager such as kueue, jobset or a replica (batchledger-0) — as a
// node failure or an OOM kill would (no graceful shutdown, no Lease release), starts it
// again at once with the same command line, environment, ports and certificates, and waits
// until it is ready again. Because nothing it was assigned changes, the admin kubeconfig,
// the webhook registrations and a Replicas proxy keep pointing at it; it returns how long
// the component was down (kill to ready).
//
// It is the chaos soak's hand (hack/soak): the component is restarted, never replaced.
func (c *Cluster) RestartComponent(ctx context.Context, name string) (time.Duration, error) {
	c.mu.Lock()
	var old *process
	for _, p := range c.procs {
		if p.name == name {
			old = p
		}
	}
	env, isManager := c.managers[name]
	c.mu.Unlock()
	if old == nil {
		return 0, fmt.Errorf("%w %q", errNoManager, name)
	}
	var rec pidRecord
	if data, err := os.ReadFile(old.pidPath); err == nil {
		_ = json.Unmarshal(data, &rec)
	}
	if len(rec.Args) == 0 {
		rec = pidRecord{Name: name, Args: old.cmd.Args, LogFile: old.logPath}
	}
	killed := time.Now()
	c.dropProcess(old)
	if err := old.kill(0); err != nil {
		return 0, err
	}
	p, err := c.respawn(old, rec)
	if err != nil {
		return 0, err
	}
	ready, err := c.readinessProbe(ctx, name, rec.Args, env, isManager)
	if err != nil {
		return 0, err
	}
	if err := waitReady(ctx, p, 2*time.Minute, ready); err != nil {
		return 0, err
	}
	if isManager {
		// A webhook server must present its certificate before the API server calls it.
		if err := waitReady(ctx, p, 30*time.Second, func() error { return c.tlsHandshake(env.WebhookPort) }); err != nil {
			return 0, err
		}
	}
	down := time.Since(killed)
	c.logf("%s SIGKILLed and restarted; ready again after %s", name, down.Round(10*time.Millisecond))
	return down, nil
}

// dropProcess forgets one process (not its manager assignment: the restart reuses it).
func (c *Cluster) dropProcess(victim *process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.procs[:0]
	for _, p := range c.procs {
		if p != victim {
			kept = append(kept, p)
		}
	}
	c.procs = kept
}

// respawn starts a process exactly as old was started (binary, arguments, environment,
// process attributes: process group or session, parent-death signal, private mount
// namespace), appending to the same log file and rewriting its pid file.
func (c *Cluster) respawn(old *process, rec pidRecord) (*process, error) {
	logFile, err := os.OpenFile(old.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy of the descriptor
	cmd := exec.Command(old.cmd.Path, old.cmd.Args[1:]...)
	cmd.Args = old.cmd.Args
	cmd.Env = old.cmd.Env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if old.cmd.SysProcAttr != nil {
		attr := *old.cmd.SysProcAttr
		cmd.SysProcAttr = &attr
	}
	fmt.Fprintf(logFile, "### %s restarting after SIGKILL: %s\n", time.Now().Format(time.RFC3339), strings.Join(rec.Args, " "))
	if err := startOnLockedThread(cmd); err != nil {
		return nil, fmt.Errorf("%s: restart %s: %w (log: %s)", old.name, cmd.Path, err, old.logPath)
	}
	return c.track(&process{name: old.name, cmd: cmd, logPath: old.logPath, pidPath: old.pidPath}, rec)
}

// readinessProbe returns the check that says a restarted component serves again: the API
// server's /readyz, the /healthz of the controller manager and scheduler (on the
// --secure-port they were started with), a Manager's /readyz on its health port.
func (c *Cluster) readinessProbe(ctx context.Context, name string, args []string, env ManagerEnv, isManager bool) (func() error, error) {
	switch {
	case isManager:
		url := fmt.Sprintf("http://%s:%d/readyz", env.Host, env.HealthPort)
		return func() error { return httpOK(ctx, plainHTTP, url) }, nil
	case name == "kube-apiserver":
		hc, err := c.apiHTTPClient(c.RESTConfig.BearerToken)
		if err != nil {
			return nil, err
		}
		url := strings.TrimSuffix(c.RESTConfig.Host, "/") + "/readyz"
		return func() error { return httpOK(ctx, hc, url) }, nil
	case name == "kube-controller-manager" || name == "kube-scheduler":
		port := flagValue(args, "--secure-port")
		if port == "" {
			return nil, fmt.Errorf("%s: no --secure-port in its command line", name)
		}
		url := "https://127.0.0.1:" + port + "/healthz"
		return func() error { return httpOK(ctx, selfSignedHTTP, url) }, nil
	}
	// kwok and etcd have no probe here: alive after a second is ready enough.
	started := time.Now()
	return func() error {
		if time.Since(started) < time.Second {
			return fmt.Errorf("%s: started %s ago", name, time.Since(started).Round(time.Millisecond))
		}
		return nil
	}, nil
}

// flagValue returns the value of --name=value in args ("" when absent).
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// Exited reports whether the named component's process has ended by itself (a crash, or
// a controller that exits when it loses its leader Lease), so a supervisor can restart
// it the way a kubelet restarts a container. It is false for names not running.
func (c *Cluster) Exited(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name {
			done, _ := p.exited()
			return done
		}
	}
	return false
}
