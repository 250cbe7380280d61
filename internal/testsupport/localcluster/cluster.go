// Package localcluster runs a real Kubernetes control plane on 127.0.0.1 for tests and demos:
// etcd, kube-apiserver, kube-controller-manager (every default controller, so the real Job
// controller), kube-scheduler, kwok acting as the kubelet of fake GPU nodes, and the real
// JobSet and Kueue managers (and, on request, the Kubeflow Trainer manager) with their
// webhooks registered as loopback URL webhooks.
//
// Binaries come from hack/build-binaries.sh; CRDs and webhook manifests are read from the
// Kueue, JobSet and Trainer module versions go.mod pins. Every server binds 127.0.0.1 on a port chosen
// at start; a state directory holds certificates, configuration, the admin kubeconfig, one
// log file per process (logs/<component>.log) and pid files (pids/<component>.json).
//
// Start runs the cluster owned by the calling process: if that process dies, the kernel
// kills the components too. With Options.Detach the components outlive the caller
// (`hack/cluster up`) and StopDetached stops them later from another process.
//
// It lives in internal/testsupport (see there why) because the e2e suites, hack/cluster,
// hack/demo, hack/bench, hack/soak and hack/installcheck all run it.
package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure Start.
type Options struct {
	// StateDir holds everything the cluster writes. Empty means a new temporary directory,
	// removed by Stop. An existing directory is wiped first (after stopping whatever its
	// pid files name).
	StateDir string
	// BinDir is searched first for binaries; then $BATCHLEDGER_BIN_DIR, <repo>/bin and the
	// build cache.
	BinDir string
	// Detach lets the processes outlive the caller (own sessions, no parent-death signal).
	Detach bool
	// Nodes are the fake nodes to create; nil means DefaultNodes().
	Nodes []NodeSpec
	// SkipKueue and SkipJobSet leave those managers out (for a bare control plane).
	SkipKueue, SkipJobSet bool
	// Trainer also runs the Kubeflow Trainer manager (TrainJobs, with TrainerRuntime
	// installed) and enables Kueue's TrainJob integration. It needs JobSet, which every
	// TrainJob is rendered into. Off by default: its CRDs alone are 2.4 MB of schema, and
	// it added ~5 s (~40%) to a start on a 2-core machine and ~40 MiB for its process.
	Trainer bool
	// Managers are started after JobSet, Kueue and Trainer, in order.
	Managers []Manager
	// Log receives one line per start-up step; nil discards them.
	Log io.Writer
	// APIServerProfiling serves the API server's /debug/pprof (its --profiling), for a
	// benchmark that profiles it; off otherwise, as in the other components.
	APIServerProfiling bool
}

// Cluster is a running local cluster.
type Cluster struct {
	// StateDir is the cluster's state directory.
	StateDir string
	// Kubeconfig is the path of the admin kubeconfig.
	Kubeconfig string
	// RESTConfig is the admin client configuration.
	RESTConfig *rest.Config
	// CA signs every serving certificate of the cluster.
	CA *CA
	// StartupDuration is how long Start took.
	StartupDuration time.Duration

	client       client.Client
	bins         *binaryFinder
	detach       bool
	ownsStateDir bool
	log          io.Writer
	apiProfiling bool

	mu    sync.Mutex
	procs []*process
	// managers maps each running Manager's name to what it was assigned.
	managers map[string]ManagerEnv
	// tokens maps each of Identities (by Name) to its bearer token.
	tokens map[string]string

	stopOnce   sync.Once
	stopErr    error
	stopSignal chan struct{}
}

// Start starts a local cluster and returns when it is ready: API server healthy, controller
// manager and scheduler healthy, fake nodes Ready and schedulable, Kueue and JobSet serving
// their webhooks. On any failure everything already started is stopped and the error names
// the component and its log file.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	begin := time.Now()
	c := &Cluster{
		bins:         newBinaryFinder(opts.BinDir),
		detach:       opts.Detach,
		log:          opts.Log,
		apiProfiling: opts.APIServerProfiling,
		stopSignal:   make(chan struct{}),
	}
	if c.log == nil {
		c.log = io.Discard
	}
	// Fail before creating anything if a binary is missing.
	need := []string{binEtcd, binAPIServer, binKCM, binScheduler, binKwok}
	if !opts.SkipKueue {
		need = append(need, binKueue)
	}
	if !opts.SkipJobSet {
		need = append(need, binJobSet)
	}
	if opts.Trainer && opts.SkipJobSet {
		return nil, errors.New("the Trainer manager needs JobSet (Options.SkipJobSet is set)")
	}
	if opts.Trainer {
		need = append(need, binTrainer)
	}
	for _, b := range need {
		if _, err := c.bins.find(b); err != nil {
			return nil, err
		}
	}
	if err := c.prepareStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	// An interrupted start-up must not leave a half cluster behind, detached or not; a
	// detached cluster is on its own once Start returns.
	release := c.stopOnSignal()
	if opts.Detach {
		defer release()
	}

	// Reading the Kueue, JobSet and Trainer manifests (megabytes of CRD YAML) overlaps with
	// the control plane's start.
	builtins := make(chan builtinManagers, 1)
	go func() { builtins <- loadBuiltinManagers(!opts.SkipJobSet, !opts.SkipKueue, opts.Trainer) }()

	if err := c.startControlPlane(ctx); err != nil {
		return nil, err
	}
	nodes := opts.Nodes
	if nodes == nil {
		nodes = DefaultNodes()
	}
	// Kueue's configuration names its namespace, JobSet's defaults to its own.
	for _, ns := range []string{"kueue-system", "jobset-system"} {
		err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.startKCMAndScheduler(gctx) })
	g.Go(func() error { return c.startKwokAndNodes(gctx, nodes) })
	g.Go(func() error {
		b := <-builtins
		if b.err != nil {
			return b.err
		}
		if err := c.startBuiltinManagers(gctx, b); err != nil {
			return err
		}
		for _, m := range opts.Managers {
			if err := c.StartManager(gctx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	c.StartupDuration = time.Since(begin)
	c.logf("cluster ready in %s; kubeconfig: %s", c.StartupDuration.Round(10*time.Millisecond), c.Kubeconfig)
	return c, nil
}

// builtinManagers are the managers every cluster runs unless told otherwise; nil ones are
// left out.
type builtinManagers struct {
	jobSet, kueue, trainer *Manager
	err                    error
}

func loadBuiltinManagers(jobSet, kueue, trainer bool) builtinManagers {
	var out builtinManagers
	for _, want := range []struct {
		on   bool
		load func() (Manager, error)
		into **Manager
	}{
		{jobSet, JobSetManager, &out.jobSet},
		{kueue, func() (Manager, error) { return KueueManager(trainer) }, &out.kueue},
		{trainer, TrainerManager, &out.trainer},
	} {
		if !want.on {
			continue
		}
		m, err := want.load()
		if err != nil {
			return builtinManagers{err: err}
		}
		*want.into = &m
	}
	return out
}

// startBuiltinManagers starts JobSet and Kueue side by side (they do not depend on each
// other), and Trainer once JobSet's CRDs are served: its TrainJob controller watches
// JobSets. Trainer's CRDs are installed together with Kueue's, before Kueue starts, so that
// Kueue sets up its TrainJob integration at once instead of polling for the API with a
// backoff; side by side, since building their schemas (2.4 MB of YAML for Trainer's
// three) is the API server's longest job at start.
func (c *Cluster) startBuiltinManagers(ctx context.Context, b builtinManagers) error {
	g, gctx := errgroup.WithContext(ctx)
	jobSetReady, crdsReady := make(chan struct{}), make(chan struct{})
	g.Go(func() error {
		if b.jobSet != nil {
			if err := c.StartManager(gctx, *b.jobSet); err != nil {
				return err
			}
		}
		close(jobSetReady)
		return nil
	})
	g.Go(func() error {
		var crds []*apiextensionsv1.CustomResourceDefinition
		for _, m := range []*Manager{b.kueue, b.trainer} {
			if m != nil {
				crds = append(crds, m.CRDs...)
			}
		}
		if err := c.installCRDs(gctx, crds); err != nil {
			return fmt.Errorf("kueue and trainer: install CRDs: %w", err)
		}
		close(crdsReady)
		if b.kueue == nil {
			return nil
		}
		return c.startWithCRDs(gctx, *b.kueue)
	})
	if b.trainer != nil {
		g.Go(func() error {
			for _, ready := range []chan struct{}{jobSetReady, crdsReady} {
				select {
				case <-ready:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return c.startWithCRDs(gctx, *b.trainer)
		})
	}
	return g.Wait()
}

// Client returns an admin controller-runtime client that knows the core, apiextensions and
// admissionregistration types.
func (c *Cluster) Client() client.Client { return c.client }

// LogFiles maps each started component to its log file.
func (c *Cluster) LogFiles() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for _, p := range c.procs {
		out[p.name] = p.logPath
	}
	return out
}

// Stop stops every component (process groups: SIGTERM, then SIGKILL) and removes the state
// directory if Start created it. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		close(c.stopSignal)
		c.mu.Lock()
		procs := append([]*process(nil), c.procs...)
		c.mu.Unlock()
		c.stopErr = stopAll(procs, stopGrace)
		if c.ownsStateDir && c.stopErr == nil {
			c.stopErr = os.RemoveAll(c.StateDir)
		}
	})
	return c.stopErr
}

// stopOnSignal stops the cluster on SIGINT/SIGTERM, then exits, so an interrupted test run
// leaves nothing behind even if the test binary would otherwise skip its cleanup.
// The returned function ends that duty early.
func (c *Cluster) stopOnSignal() (release func()) {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer signal.Stop(ch)
		select {
		case s := <-ch:
			fmt.Fprintf(os.Stderr, "localcluster: %v: stopping the local cluster\n", s)
			_ = c.Stop()
			os.Exit(130)
		case <-c.stopSignal:
		case <-done:
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

func (c *Cluster) logf(format string, args ...any) {
	if c.log == nil {
		return
	}
	fmt.Fprintf(c.log, "[localcluster %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// prepareStateDir creates (or recycles) the state dir and writes the CA, the service-account
// key and the admin token.
func (c *Cluster) prepareStateDir(dir string) error {
	if dir == "" {
		removeStaleTempDirs()
		d, err := os.MkdirTemp("", tempDirPrefix)
		if err != nil {
			return err
		}
		dir, c.ownsStateDir = d, true
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		dir = abs
		// Stale processes of an earlier run would hold ports and files.
		if recs, _ := readPidRecords(dir); len(recs) > 0 {
			if err := killRecorded(dir, recs, stopGrace); err != nil {
				return err
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	c.StateDir = dir
	for _, sub := range []string{"logs", "pids", "pki"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	ca, err := newCA()
	if err != nil {
		return err
	}
	c.CA = ca
	if err := ca.writeFiles(filepath.Join(dir, "pki")); err != nil {
		return err
	}
	if err := writeServiceAccountKey(filepath.Join(dir, "pki")); err != nil {
		return err
	}
	return ca.IssueServing(filepath.Join(dir, "pki", "apiserver"), "kube-apiserver")
}

const tempDirPrefix = "batchledger-localcluster-"

// removeStaleTempDirs deletes the temporary state dirs of clusters whose owner died without
// cleaning up (the kernel killed their components, but not their files). A dir is kept while
// any of its components runs, and for a minute after creation, when another process may be
// starting it.
func removeStaleTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempDirPrefix+"*"))
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || time.Since(st.ModTime()) < time.Minute {
			continue
		}
		recs, _ := readPidRecords(d)
		if len(stillAlive(d, recs)) == 0 {
			_ = os.RemoveAll(d)
		}
	}
}

// writeKubeconfig writes the admin kubeconfig and builds the admin client.
func (c *Cluster) writeKubeconfig(apiPort int, token string) error {
	c.Kubeconfig = filepath.Join(c.StateDir, "kubeconfig")
	cfg, err := writeKubeconfigFile(c.Kubeconfig, apiPort, c.CA.CertPEM, token)
	if err != nil {
		return err
	}
	restCfg, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 100, 200
	c.RESTConfig = restCfg
	c.client, err = client.New(restCfg, client.Options{Scheme: clusterScheme()})
	return err
}

// writeKubeconfigFile writes a kubeconfig at path for the API server on apiPort,
// authenticating with token.
func writeKubeconfigFile(path string, apiPort int, caPEM []byte, token string) (*clientcmdapi.Config, error) {
	const name = "batchledger-local"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	return cfg, clientcmd.WriteToFile(*cfg, path)
}

func clusterScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	_ = admissionregistrationv1.AddToScheme(s)
	_ = trainer.AddToScheme(s)
	return s
}

// apply server-side applies a typed object with the cluster's field manager.
func (c *Cluster) apply(ctx context.Context, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	gvk, err := c.client.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	un := &unstructured.Unstructured{Object: u}
	un.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(un.Object, "status")
	unstructured.RemoveNestedField(un.Object, "metadata", "creationTimestamp")
	return c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(un), client.FieldOwner(fieldManager), client.ForceOwnership)
}

const fieldManager = "batchledger-localcluster"

// freePorts reserves n distinct free loopback ports. They are released before the
// components bind them; a port grabbed in between makes that component exit, which
// start-up reports with its log.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady polls check every 100ms until it succeeds, the process exits (an error with its
// log tail), or timeout.
func waitReady(ctx context.Context, p *process, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if exited, _ := p.exited(); exited {
			return p.diedError()
		}
		if last = check(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (last check: %v); its log is %s:\n%s", p.name, timeout, last, p.logPath, tail(p.logPath, 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", p.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

// WriteLogTail writes the last lines lines of component's log to w, headed by the
// component's name, so that a failed suite's output shows what the component did when
// the state directory is gone. It writes nothing for a component never started.
func (c *Cluster) WriteLogTail(w io.Writer, component string, lines int) error {
	path, ok := c.LogFiles()[component]
	if !ok {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	from := max(0, len(all)-lines)
	if _, err := fmt.Fprintf(w, "--- last %d lines of %s (%s)\n", len(all)-from, component, path); err != nil {
		return err
	}
	_, err = io.WriteString(w, strings.Join(all[from:], "\n")+"\n")
	return err
}
