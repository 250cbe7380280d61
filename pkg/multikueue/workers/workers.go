// Package workers is the manager cluster's reader of MultiKueue worker clusters'
// WorkerResults and WorkerJobs (docs/multikueue.md): per Secret of batchledger's own
// namespace labelled multikueue.LabelWorkerCluster, a cache of that worker's records read with the
// kubeconfig it holds (a read-only identity on the worker), and whether the worker
// answers. It never reads Kueue's MultiKueueCluster Secrets.
package workers

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
)

// DefaultProbeInterval is how often each worker is asked whether it answers.
const DefaultProbeInterval = 10 * time.Second

// probeTimeout bounds one probe.
const probeTimeout = 5 * time.Second

// indexWorkload indexes WorkerResults and WorkerJobs by the manager Workload they were
// recorded for.
const indexWorkload = "workload"

// Registry holds a cache of WorkerResults per worker cluster, following the worker
// kubeconfig Secrets of the manager's namespace. Start it with the manager (a Runnable,
// leader only: only the leader records results).
type Registry struct {
	// Namespace is batchledger's namespace on the manager, where the Secrets are.
	Namespace string
	// Scheme knows v1alpha1.
	Scheme *runtime.Scheme
	// Secrets is the cache of the labelled Secrets of Namespace (NewSecretCache).
	Secrets cache.Cache
	// ProbeInterval is how often each worker is probed (0: DefaultProbeInterval).
	ProbeInterval time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time

	events chan event.GenericEvent
	mu     sync.Mutex
	ctx    context.Context
	// byWorker are the workers by name; bySecret the worker each Secret names, and
	// kubeconfigs the kubeconfig each holds.
	byWorker    map[string]*worker
	bySecret    map[string]string
	kubeconfigs map[string][]byte
	// ready: every Secret there was at start has been seen.
	ready bool
}

// worker is one worker cluster as the registry reads it.
type worker struct {
	kubeconfig []byte
	cache      cache.Cache
	probe      client.Client
	stop       context.CancelFunc
	state      multikueue.WorkerState
}

// NewSecretCache is the cache of the worker kubeconfig Secrets: namespace's Secrets that
// carry multikueue.LabelWorkerCluster, no other.
func NewSecretCache(cfg *rest.Config, base cache.Options, namespace string) (cache.Cache, error) {
	req, err := labels.NewRequirement(multikueue.LabelWorkerCluster, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	base.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	base.ByObject = map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*req)}}
	return cache.New(cfg, base)
}

// Events wake the accounts of what a worker recorded: each carries a WorkerResult, or a
// WorkerJob (written or changed; also for a WorkerResult of its Job's pod).
func (r *Registry) Events() <-chan event.GenericEvent {
	r.init()
	return r.events
}

// wake sends obj to the accounts (Events), waiting while the queue is full rather than
// dropping it: an account whose dispatched children are read has no periodic recheck
// that would read what a dropped wake-up told it, and the informer whose handler waits
// keeps the events behind it. It gives up only when ctx ends (the worker is dropped, or
// the manager stops).
func (r *Registry) wake(ctx context.Context, obj client.Object) {
	select {
	case r.events <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

func (r *Registry) init() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.events == nil {
		r.events = make(chan event.GenericEvent, 1024)
		r.byWorker = map[string]*worker{}
		r.bySecret = map[string]string{}
		r.kubeconfigs = map[string][]byte{}
	}
}

// Start follows the Secrets, keeps a cache per worker and probes the workers until ctx
// ends.
func (r *Registry) Start(ctx context.Context) error {
	r.init()
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	inf, err := r.Secrets.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.secretChanged(obj) },
		UpdateFunc: func(_, obj any) { r.secretChanged(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok {
				r.secretGone(s.Name)
			}
		},
	})
	if err != nil {
		return err
	}
	go func() { _ = r.Secrets.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return fmt.Errorf("the worker kubeconfig Secrets of %s never synced", r.Namespace)
	}
	r.mu.Lock()
	r.ready = true
	r.mu.Unlock()
	interval := r.ProbeInterval
	if interval == 0 {
		interval = DefaultProbeInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r.probeAll(ctx)
		select {
		case <-ctx.Done():
			r.mu.Lock()
			for _, w := range r.byWorker {
				w.stop()
			}
			r.mu.Unlock()
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is true: only the leader records results.
func (r *Registry) NeedLeaderElection() bool { return true }

// secretChanged (re)starts the worker a Secret names when its kubeconfig changed.
func (r *Registry) secretChanged(obj any) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	name := s.Labels[multikueue.LabelWorkerCluster]
	r.mu.Lock()
	defer r.mu.Unlock()
	old, relabelled := r.bySecret[s.Name]
	r.bySecret[s.Name] = name
	r.kubeconfigs[s.Name] = s.Data[multikueue.KubeconfigKey]
	if relabelled && old != name {
		r.followLocked(old) // it names another worker now
	}
	r.startLocked(s.Name, name, s.Data[multikueue.KubeconfigKey])
}

// followLocked reads worker name with a Secret that still names it (another one, when
// two did: a kubeconfig rotated by giving the new one first), or forgets it when none
// does; called with r.mu held.
func (r *Registry) followLocked(name string) {
	var secrets []string
	for secret, worker := range r.bySecret {
		if worker == name {
			secrets = append(secrets, secret)
		}
	}
	if len(secrets) == 0 {
		r.dropLocked(name)
		return
	}
	slices.Sort(secrets)
	r.startLocked(secrets[0], name, r.kubeconfigs[secrets[0]])
}

// startLocked (re)starts worker name with the kubeconfig of secret, unless it runs with
// that one already; called with r.mu held.
func (r *Registry) startLocked(secret, name string, kubeconfig []byte) {
	log := ctrl.Log.WithName("workers").WithValues("secret", secret)
	if w, ok := r.byWorker[name]; ok && bytes.Equal(w.kubeconfig, kubeconfig) {
		return
	}
	r.dropLocked(name)
	w, err := r.startWorker(name, kubeconfig)
	if err != nil {
		log.Error(err, "worker kubeconfig unusable", "worker", name)
		r.byWorker[name] = &worker{kubeconfig: kubeconfig, stop: func() {},
			state: multikueue.WorkerState{Configured: true, UnreachableSince: r.now(), Err: err.Error()}}
		return
	}
	log.Info("reading the results recorded on a worker cluster", "worker", name)
	r.byWorker[name] = w
}

// secretGone forgets the worker a deleted Secret named.
func (r *Registry) secretGone(secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, ok := r.bySecret[secret]; ok {
		delete(r.bySecret, secret)
		delete(r.kubeconfigs, secret)
		ctrl.Log.WithName("workers").Info("worker kubeconfig removed", "worker", name, "secret", secret)
		r.followLocked(name)
	}
}

func (r *Registry) dropLocked(name string) {
	if w, ok := r.byWorker[name]; ok {
		w.stop()
		delete(r.byWorker, name)
	}
}

// startWorker starts the cache of a worker's WorkerResults.
func (r *Registry) startWorker(name string, kubeconfig []byte) (*worker, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", multikueue.KubeconfigKey, err)
	}
	c, err := cache.New(cfg, cache.Options{Scheme: r.Scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&v1alpha1.WorkerResult{}: {}, &v1alpha1.WorkerJob{}: {}}})
	if err != nil {
		return nil, err
	}
	probe, err := client.New(cfg, client.Options{Scheme: r.Scheme})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(r.ctx)
	if err := c.IndexField(ctx, &v1alpha1.WorkerResult{}, indexWorkload, func(o client.Object) []string {
		rec := o.(*v1alpha1.WorkerResult)
		return []string{rec.Namespace + "/" + rec.Workload}
	}); err != nil {
		stop()
		return nil, err
	}
	if err := c.IndexField(ctx, &v1alpha1.WorkerJob{}, indexWorkload, func(o client.Object) []string {
		rec := o.(*v1alpha1.WorkerJob)
		return []string{rec.Namespace + "/" + rec.Workload}
	}); err != nil {
		stop()
		return nil, err
	}
	send := func(obj client.Object) { r.wake(ctx, obj) }
	inf, err := c.GetInformer(ctx, &v1alpha1.WorkerResult{}, cache.BlockUntilSynced(false))
	if err != nil {
		stop()
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		rec, ok := obj.(*v1alpha1.WorkerResult)
		if !ok {
			return
		}
		send(rec)
		// The result of a dispatched JobSet's pod names its child Job, which no account
		// names: the child's record names the JobSet the accounts name.
		var job v1alpha1.WorkerJob
		// Bounded: a handler must not wait long on the other informer's sync.
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if rec.JobUID != "" && c.Get(gctx, client.ObjectKey{Namespace: rec.Namespace, Name: string(rec.JobUID)}, &job) == nil {
			send(&job)
		}
	}}); err != nil {
		stop()
		return nil, err
	}
	jobs, err := c.GetInformer(ctx, &v1alpha1.WorkerJob{}, cache.BlockUntilSynced(false))
	if err != nil {
		stop()
		return nil, err
	}
	if _, err := jobs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if rec, ok := obj.(*v1alpha1.WorkerJob); ok {
				send(rec)
			}
		},
		UpdateFunc: func(_, obj any) {
			if rec, ok := obj.(*v1alpha1.WorkerJob); ok {
				send(rec)
			}
		},
	}); err != nil {
		stop()
		return nil, err
	}
	w := &worker{kubeconfig: kubeconfig, cache: c, probe: probe, stop: stop, state: multikueue.WorkerState{Configured: true}}
	go func() { _ = c.Start(ctx) }()
	go func() {
		if c.WaitForCacheSync(ctx) {
			r.mu.Lock()
			w.state.Synced = true
			r.mu.Unlock()
		}
	}()
	return w, nil
}

// probeAll asks every worker for one WorkerResult: what answers is reachable.
func (r *Registry) probeAll(ctx context.Context) {
	r.mu.Lock()
	ws := make(map[string]*worker, len(r.byWorker))
	for n, w := range r.byWorker {
		if w.probe != nil {
			ws[n] = w
		}
	}
	r.mu.Unlock()
	for name, w := range ws {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := w.probe.List(pctx, &v1alpha1.WorkerResultList{}, client.Limit(1))
		cancel()
		r.mu.Lock()
		switch {
		case err == nil:
			w.state.UnreachableSince, w.state.Err = time.Time{}, ""
		case w.state.UnreachableSince.IsZero():
			w.state.UnreachableSince, w.state.Err = r.now(), err.Error()
			ctrl.Log.WithName("workers").Info("worker cluster not reachable", "worker", name, "error", err.Error())
		default:
			w.state.Err = err.Error()
		}
		r.mu.Unlock()
	}
}

// Records are the WorkerResults worker recorded for the manager Workload
// namespace/workload, and what the registry knows of the worker: nothing is read from a
// worker it has no kubeconfig for, or whose records it has not read whole yet.
func (r *Registry) Records(ctx context.Context, worker, namespace, workload string) ([]v1alpha1.WorkerResult, multikueue.WorkerState, error) {
	w, state, ok := r.synced(worker)
	if !ok {
		return nil, state, nil
	}
	var list v1alpha1.WorkerResultList
	if err := w.cache.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{indexWorkload: namespace + "/" + workload}); err != nil {
		return nil, state, err
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.WorkerResult) int { return a.FinishedAt.Compare(b.FinishedAt.Time) })
	return list.Items, state, nil
}

// Jobs are the WorkerJobs worker recorded for the manager Workload namespace/workload
// (the child Jobs of a dispatched JobSet), and what the registry knows of the worker, as
// Records.
func (r *Registry) Jobs(ctx context.Context, worker, namespace, workload string) ([]v1alpha1.WorkerJob, multikueue.WorkerState, error) {
	w, state, ok := r.synced(worker)
	if !ok {
		return nil, state, nil
	}
	var list v1alpha1.WorkerJobList
	if err := w.cache.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{indexWorkload: namespace + "/" + workload}); err != nil {
		return nil, state, err
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.WorkerJob) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return list.Items, state, nil
}

// synced is worker's cache when its records were read whole, and what is known of it.
func (r *Registry) synced(worker string) (*worker, multikueue.WorkerState, bool) {
	r.init()
	r.mu.Lock()
	w, ok := r.byWorker[worker]
	// Before the Secrets were read whole, a worker without one may still have one: taken
	// as configured and not read yet, so that nothing counts as lost meanwhile.
	state := multikueue.WorkerState{Configured: !r.ready}
	if ok {
		state = w.state
	}
	r.mu.Unlock()
	if !ok || !state.Synced || w.cache == nil {
		return nil, state, false
	}
	return w, state, true
}

func (r *Registry) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
