package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// BatchledgerName is the Manager name of the batchledger controller in the local cluster.
const BatchledgerName = "batchledger"

// BuildBatchledger compiles cmd/batchledger into dir and returns the binary's path. The
// Go build cache makes repeated builds link-only.
func BuildBatchledger(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "batchledger")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/batchledger")
	cmd.Dir = root
	if os.Getenv("GOGC") == "" {
		// As hack/lib.sh's BUILD_GOGC: the compiler collects garbage less often, for
		// 20-25% less CPU on a cold build.
		cmd.Env = append(os.Environ(), "GOGC=400")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/batchledger: %v\n%s", err, b)
	}
	return out, nil
}

// BatchledgerManager runs the batchledger controller built at binary: its CRD from
// config/crd/bases, its webhooks from the config/webhook kustomization (manifests generated
// by `make generate`, scoped by its patches), served
// on loopback with a certificate of the cluster CA. extraArgs are appended to its flags.
// It runs as its own ServiceAccount (BatchledgerIdentity) with the RBAC and admission
// policies of config/ (batchledgerObjects), not as the admin.
func BatchledgerManager(binary string, extraArgs ...string) (Manager, error) {
	root, err := RepoRoot()
	if err != nil {
		return Manager{}, err
	}
	crdDir := filepath.Join(root, "config", "crd", "bases")
	entries, err := os.ReadDir(crdDir)
	if err != nil {
		return Manager{}, fmt.Errorf("batchledger CRDs: %w", err)
	}
	var paths []string
	for _, e := range entries {
		paths = append(paths, filepath.Join(crdDir, e.Name()))
	}
	crds, err := LoadCRDs(paths...)
	if err != nil {
		return Manager{}, err
	}
	hooks, err := LoadWebhookComponent(filepath.Join(root, "config", "webhook"))
	if err != nil {
		return Manager{}, err
	}
	objs, err := batchledgerObjects(root, extraArgs)
	if err != nil {
		return Manager{}, err
	}
	return Manager{
		Name:     BatchledgerName,
		CRDs:     crds,
		Webhooks: hooks,
		Identity: &BatchledgerIdentity,
		Objects:  objs,
		Command: func(env ManagerEnv) (*ManagerCommand, error) {
			// The manager's namespace: the key that signs recorded results is kept there.
			args := append([]string{binary}, batchledgerFlags(env, batchledgerRunNamespace)...)
			return &ManagerCommand{Args: append(args, extraArgs...)}, nil
		},
	}, nil
}

// batchledgerFlags are the flags a batchledger process of either role takes from the
// cluster: the addresses, certificates and kubeconfig env assigned it, and its namespace.
func batchledgerFlags(env ManagerEnv, namespace string) []string {
	return []string{
		"--kubeconfig=" + env.Kubeconfig,
		fmt.Sprintf("--health-probe-bind-address=%s:%d", env.Host, env.HealthPort),
		fmt.Sprintf("--metrics-bind-address=%s:%d", env.Host, env.MetricsPort),
		"--webhook-host=" + env.Host,
		fmt.Sprintf("--webhook-port=%d", env.WebhookPort),
		"--webhook-cert-dir=" + env.CertDir,
		"--zap-log-level=2",
		"--namespace=" + namespace,
	}
}

// recordManager remembers what a Manager was assigned, for ManagerEnv.
func (c *Cluster) recordManager(name string, env ManagerEnv) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.managers == nil {
		c.managers = map[string]ManagerEnv{}
	}
	c.managers[name] = env
}

// ManagerEnv returns what a running Manager was assigned (its ports above all).
func (c *Cluster) ManagerEnv(name string) (ManagerEnv, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	env, ok := c.managers[name]
	return env, ok
}

// errNoManager: no running manager of that name.
var errNoManager = errors.New("no running manager")

// StopManager stops a Manager's process, as a crash or a rollout would. Its webhook
// configurations stay registered: calls to them fail until StartManager runs it again.
func (c *Cluster) StopManager(name string) error {
	victim := c.removeProcess(name)
	if victim == nil {
		return fmt.Errorf("%w %q", errNoManager, name)
	}
	return victim.kill(5 * time.Second)
}

// removeProcess forgets the running process of a manager and returns it (nil if none).
func (c *Cluster) removeProcess(name string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var victim *process
	kept := c.procs[:0]
	for _, p := range c.procs {
		if p.name == name && victim == nil {
			victim = p
			continue
		}
		kept = append(kept, p)
	}
	c.procs = kept
	delete(c.managers, name)
	return victim
}
