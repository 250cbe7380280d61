package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/scheme"
)

// clusterSpec is the fresh local cluster a run needs.
type clusterSpec struct {
	// nodes fake GPU nodes named <nodePrefix>-<i>, each with gpusPerNode GPUs and the
	// gpu-type label flavor (the ResourceFlavor's node label).
	nodePrefix, flavor string
	nodes, gpusPerNode int
	// binary is the batchledger controller, started with controllerArgs; "" runs no
	// controller.
	binary         string
	controllerArgs []string
	// controllerEnv is added to the controller's environment.
	controllerEnv []string
	log           io.Writer
	// apiserverProfiling serves the API server's /debug/pprof (profileAPIServer).
	apiserverProfiling bool
}

// cluster is the running cluster of a run: a client that can watch, and a sampler of
// its cost counters.
type cluster struct {
	*localcluster.Cluster
	c       client.WithWatch
	sampler sampler
}

// startCluster starts the cluster of spec; stop it with stop.
func startCluster(ctx context.Context, spec clusterSpec) (*cluster, error) {
	opts := localcluster.Options{Log: spec.log, APIServerProfiling: spec.apiserverProfiling}
	for i := range spec.nodes {
		opts.Nodes = append(opts.Nodes, localcluster.NodeSpec{
			Name: fmt.Sprintf("%s-%d", spec.nodePrefix, i), Labels: map[string]string{localcluster.GPUTypeLabel: spec.flavor},
			GPUs: spec.gpusPerNode, CPU: "512", Memory: "4Ti",
		})
	}
	if spec.binary != "" {
		// Logging as the chart installs it (logLevel 0: the flag left out, info), not at
		// the local cluster's level for tests; spec.controllerArgs, after it, may set
		// another.
		args := append([]string{"--zap-log-level=info"}, spec.controllerArgs...)
		m, err := localcluster.BatchledgerManager(spec.binary, args...)
		if err != nil {
			return nil, err
		}
		if len(spec.controllerEnv) > 0 {
			command := m.Command
			m.Command = func(env localcluster.ManagerEnv) (*localcluster.ManagerCommand, error) {
				mc, err := command(env)
				if err != nil {
					return nil, err
				}
				mc.Env = append(mc.Env, spec.controllerEnv...)
				return mc, nil
			}
		}
		opts.Managers = []localcluster.Manager{m}
	}
	cl, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &cluster{Cluster: cl, sampler: sampler{stateDir: cl.StateDir}}
	if out.c, err = client.NewWithWatch(cl.RESTConfig, client.Options{Scheme: scheme.Must()}); err != nil {
		out.stop("bench")
		return nil, err
	}
	if spec.binary != "" {
		env, ok := cl.ManagerEnv(localcluster.BatchledgerName)
		if !ok {
			out.stop("bench")
			return nil, errors.New("batchledger is not running")
		}
		out.sampler.metrics = env.MetricsURL()
	}
	return out, nil
}

// stop stops the cluster, reporting a failure as who.
func (cl *cluster) stop(who string) {
	if err := cl.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stopping the cluster: %v\n", who, err)
	}
}

// createQueues creates objs (a ResourceFlavor, ClusterQueues, their namespaces and
// LocalQueues, ...), leaving those that exist already, and waits until every ClusterQueue
// among them is active.
func (cl *cluster) createQueues(ctx context.Context, objs ...client.Object) error {
	var cqs []string
	for _, o := range objs {
		if err := cl.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%T %s: %w", o, o.GetName(), err)
		}
		if _, ok := o.(*kueue.ClusterQueue); ok {
			cqs = append(cqs, o.GetName())
		}
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		for _, name := range cqs {
			var cq kueue.ClusterQueue
			if err := cl.c.Get(ctx, client.ObjectKey{Name: name}, &cq); err != nil || !apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	})
}

// startWatch runs watchObjects in wg until ctx ends, sending its failure to errs (which must have
// room for it), and returns once the watch is open, so that nothing created afterwards
// goes unseen.
func startWatch[T client.Object](ctx context.Context, wg *sync.WaitGroup, errs chan<- error, cl *cluster, ns string, list client.ObjectList, fn func(T, time.Time)) {
	ready := make(chan struct{})
	wg.Go(func() {
		if err := watchObjects(ctx, cl, ns, list, ready, fn); err != nil && ctx.Err() == nil {
			errs <- err
		}
	})
	<-ready
}

// watchObjects lists then watches list's kind in ns ("": every namespace), handing every added
// or modified object to fn with the time it arrived, and resumes from the last
// resourceVersion when the server ends the watch. ready is closed once the first watch is
// open.
func watchObjects[T client.Object](ctx context.Context, cl *cluster, ns string, list client.ObjectList, ready chan<- struct{}, fn func(T, time.Time)) error {
	if err := cl.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		close(ready)
		return err
	}
	rv := list.(metav1.ListInterface).GetResourceVersion()
	first := true
	for ctx.Err() == nil {
		w, err := cl.c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if first {
			close(ready)
			first = false
		}
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				w.Stop()
				return fmt.Errorf("watch: %v", apierrors.FromObject(ev.Object))
			}
			if o, ok := ev.Object.(metav1.Object); ok {
				rv = o.GetResourceVersion()
			}
			if o, ok := ev.Object.(T); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				fn(o, now)
			}
		}
		w.Stop()
	}
	return nil
}

// podPhases counts a namespace's pods by phase, for the error of a run that never ends.
func (cl *cluster) podPhases(ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := cl.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	n := map[corev1.PodPhase]int{}
	for _, p := range pods.Items {
		n[p.Status.Phase]++
	}
	return fmt.Sprint(n)
}

// poll calls cond every 200ms until it is true or fails, or limit has passed.
func poll(ctx context.Context, limit time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pprofAddress is a free loopback address for the controller's /debug/pprof, to pass it
// as --pprof-bind-address.
func pprofAddress() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// cpuProfile writes a CPU profile of seconds of the process serving /debug/pprof at base
// (http://host:port of the controller's --pprof-bind-address, or the API server's URL) to
// path; hc makes the request (the API server's needs the admin credentials).
func cpuProfile(ctx context.Context, hc *http.Client, base, who string, seconds int, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote a %ds CPU profile of %s to %s (go tool pprof -top %s)\n", seconds, who, path, path)
	return f.Close()
}

// profileAPIServer writes a CPU profile of seconds of the cluster's API server (started
// with clusterSpec.apiserverProfiling) to path.
func (cl *cluster) profileAPIServer(ctx context.Context, seconds int, path string) error {
	hc, err := rest.HTTPClientFor(cl.RESTConfig)
	if err != nil {
		return err
	}
	return cpuProfile(ctx, hc, strings.TrimSuffix(cl.RESTConfig.Host, "/"), "kube-apiserver", seconds, path)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// prefixWriter indents the cluster's start-up log under the run's heading.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	lines := strings.SplitAfter(string(b), "\n")
	var s strings.Builder
	for _, l := range lines {
		if l != "" {
			s.WriteString(p.prefix + l)
		}
	}
	if _, err := io.WriteString(p.w, s.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}
