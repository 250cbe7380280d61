package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// MultiKueueCheck is the AdmissionCheck ConnectWorkers creates on the manager: a
// ClusterQueue naming it dispatches its Workloads to the workers.
const MultiKueueCheck = "multikueue"

// MultiKueue is a MultiKueue fleet on this machine: a manager cluster whose Kueue
// dispatches Workloads to worker clusters, each a whole local Cluster of its own (its
// Kueue, JobSet, kwok nodes).
type MultiKueue struct {
	Manager *Cluster
	// Workers are the worker clusters by the name the manager knows them by (their
	// MultiKueueCluster).
	Workers map[string]*Cluster
	// StartupDuration is how long StartMultiKueue took, all clusters started side by
	// side and connected.
	StartupDuration time.Duration
}

// StartMultiKueue starts the manager cluster (manager) and one cluster per name in
// workers (worker, each with its own state directory unless worker.StateDir is set, then
// <StateDir>-<name>), side by side, and connects them (ConnectWorkers). On any failure
// every cluster already started is stopped.
func StartMultiKueue(ctx context.Context, manager Options, workers []string, worker Options) (_ *MultiKueue, err error) {
	begin := time.Now()
	mk := &MultiKueue{Workers: map[string]*Cluster{}}
	defer func() {
		if err != nil {
			_ = mk.Stop()
		}
	}()
	clusters := make([]*Cluster, len(workers)+1)
	g, gctx := errgroup.WithContext(ctx)
	for i := range clusters {
		o := manager
		if i > 0 {
			o = worker
			if o.StateDir != "" {
				o.StateDir += "-" + workers[i-1]
			}
		}
		g.Go(func() error {
			c, err := Start(gctx, o)
			clusters[i] = c
			return err
		})
	}
	err = g.Wait()
	mk.Manager = clusters[0]
	for i, name := range workers {
		if clusters[i+1] != nil {
			mk.Workers[name] = clusters[i+1]
		}
	}
	if err != nil {
		return mk, err
	}
	if err := mk.ConnectWorkers(ctx); err != nil {
		return mk, err
	}
	mk.StartupDuration = time.Since(begin)
	return mk, nil
}

// Stop stops every cluster of the fleet.
func (mk *MultiKueue) Stop() error {
	var errs []error
	for _, c := range append([]*Cluster{mk.Manager}, mk.workers()...) {
		if c != nil {
			errs = append(errs, c.Stop())
		}
	}
	return errors.Join(errs...)
}

func (mk *MultiKueue) workers() []*Cluster {
	names := make([]string, 0, len(mk.Workers))
	for n := range mk.Workers {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*Cluster, len(names))
	for i, n := range names {
		out[i] = mk.Workers[n]
	}
	return out
}

// ConnectWorkers makes the manager's Kueue dispatch to the workers: per worker a
// kubeconfig Secret in kueue-system (the worker's admin kubeconfig: a test fleet; a real
// one gives Kueue the worker role Kueue documents) and a MultiKueueCluster of its name,
// a MultiKueueConfig listing them all and the AdmissionCheck MultiKueueCheck. It waits
// until every MultiKueueCluster and the AdmissionCheck are Active.
func (mk *MultiKueue) ConnectWorkers(ctx context.Context) error {
	cl, err := mk.Manager.KueueClient()
	if err != nil {
		return err
	}
	var names []string
	for name, w := range mk.Workers {
		names = append(names, name)
		kubeconfig, err := os.ReadFile(w.Kubeconfig)
		if err != nil {
			return err
		}
		secret := &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "multikueue-" + name, Namespace: "kueue-system"},
			Data:       map[string][]byte{"kubeconfig": kubeconfig},
		}
		if err := cl.Create(ctx, secret); err != nil {
			return fmt.Errorf("multikueue: worker %s: %w", name, err)
		}
		mkc := &kueue.MultiKueueCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{KubeConfig: &kueue.KubeConfig{
				LocationType: kueue.SecretLocationType, Location: secret.Name,
			}}},
		}
		if err := cl.Create(ctx, mkc); err != nil {
			return fmt.Errorf("multikueue: worker %s: %w", name, err)
		}
	}
	slices.Sort(names)
	cfg := &kueue.MultiKueueConfig{ObjectMeta: metav1.ObjectMeta{Name: "workers"}, Spec: kueue.MultiKueueConfigSpec{Clusters: names}}
	if err := cl.Create(ctx, cfg); err != nil {
		return fmt.Errorf("multikueue: %w", err)
	}
	ac := &kueue.AdmissionCheck{
		ObjectMeta: metav1.ObjectMeta{Name: MultiKueueCheck},
		Spec: kueue.AdmissionCheckSpec{ControllerName: kueue.MultiKueueControllerName,
			Parameters: &kueue.AdmissionCheckParametersReference{APIGroup: kueue.GroupVersion.Group, Kind: "MultiKueueConfig", Name: cfg.Name}},
	}
	if err := cl.Create(ctx, ac); err != nil {
		return fmt.Errorf("multikueue: %w", err)
	}
	for _, name := range names {
		if err := waitActive(ctx, cl, &kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: name}},
			func(o *kueue.MultiKueueCluster) []metav1.Condition { return o.Status.Conditions }, kueue.MultiKueueClusterActive); err != nil {
			return err
		}
	}
	return waitActive(ctx, cl, ac, func(o *kueue.AdmissionCheck) []metav1.Condition { return o.Status.Conditions }, kueue.AdmissionCheckActive)
}

// waitActive waits up to a minute for obj's condition typ to be True.
func waitActive[T client.Object](ctx context.Context, cl client.Client, obj T, conds func(T) []metav1.Condition, typ string) error {
	var last []metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, nil //nolint:nilerr // not created or not served yet: poll again
		}
		last = conds(obj)
		return apimeta.IsStatusConditionTrue(last, typ), nil
	})
	if err != nil {
		return fmt.Errorf("multikueue: %T %s not %s: %w (conditions %+v)", obj, obj.GetName(), typ, err, last)
	}
	return nil
}

// KueueClient is an admin client that also knows Kueue's v1beta2 types.
func (c *Cluster) KueueClient() (client.Client, error) {
	s := clusterScheme()
	if err := kueue.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(c.RESTConfig, client.Options{Scheme: s})
}

// MemoryMiB is the resident memory of each running component of the cluster (VmRSS,
// MiB), by component name: what one more cluster of a fleet costs the machine.
func (c *Cluster) MemoryMiB() map[string]float64 {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	out := map[string]float64{}
	for _, p := range procs {
		if p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		if kb, err := vmRSSKiB(p.cmd.Process.Pid); err == nil {
			out[p.name] += kb / 1024
		}
	}
	return out
}

// vmRSSKiB is a process's VmRSS from /proc, in KiB.
func vmRSSKiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}
