package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"batchledger.dev/batchledger/pkg/relations"
)

// LatePodsIdle is how long a late Job's pod cache lives without a reconcile reading it.
// A Job's account reads it on every change of the Job, so only a Job at rest (finished,
// or whose accounts are gone) reaches it; reading it again later costs one LIST.
const LatePodsIdle = 10 * time.Minute

// LatePods holds the succeeded pods of the Jobs that started before an account named
// them. Such a Job's pods carry no scope label (a started Job's pod template cannot
// change), so neither pod cache holds them. An account requiring results reads here too
// the succeeded pods of a Job of the coverage scope, whose pods the coverage cache holds
// as metadata only: one whose account started requiring results after it ran, or whose
// template was raised to the results scope after Kueue preempted it (withEarlierScope).
// Reading them from the API server on every reconcile made an account's cost grow with
// the square of its Job's size; here each such Job gets its own small cache, selected by
// the Job's controller-uid label and the Succeeded phase in the Job's namespace: one LIST
// when an account first reads it, then one watch event per pod that succeeds or is
// deleted, each of which wakes the Job's accounts (the Job controller's status update may
// reach the controller before the pod does). List-then-watch from the list's
// resourceVersion is how every informer starts, so a pod that succeeds while the cache
// starts is in the list or arrives as an event: none is missed, and the store holds each
// pod once, by UID, so none is counted twice. Pods are stripped as the manager's cache
// strips results pods (podTransform): enough to count attempts and to read results.
//
// A LatePods is a manager.Runnable: the caches run under the context Start receives, and
// one unread for LatePodsIdle is stopped.
type LatePods struct {
	// NewCache creates the cache of one Job's succeeded pods; NewLatePods sets it to
	// newLateJobCache.
	NewCache func(job *batchv1.Job) (cache.Cache, error)
	// Idle is how long an unread cache lives (LatePodsIdle when 0).
	Idle time.Duration
	// Now is the clock; tests may replace it.
	Now func() time.Time

	events chan event.GenericEvent
	mu     sync.Mutex
	ctx    context.Context
	jobs   map[types.UID]*lateJob
}

// lateJob is one Job's running pod cache.
type lateJob struct {
	cache    cache.Cache
	stop     context.CancelFunc
	lastRead time.Time
}

// NewLatePods creates the registry of late Jobs' pod caches, each sharing base's HTTP
// client, scheme and RESTMapper.
func NewLatePods(cfg *rest.Config, base cache.Options) *LatePods {
	return &LatePods{NewCache: func(job *batchv1.Job) (cache.Cache, error) {
		return newLateJobCache(cfg, base, job)
	}}
}

// newLateJobCache is the cache of one Job's succeeded pods, selected by the Job's own
// selector (relations.JobPodSelector: a manualSelector Job's pods carry no controller-uid
// label).
func newLateJobCache(cfg *rest.Config, base cache.Options, job *batchv1.Job) (cache.Cache, error) {
	selector, err := relations.JobPodSelector(job)
	if err != nil {
		return nil, err
	}
	base.DefaultNamespaces = map[string]cache.Config{job.Namespace: {}}
	base.DefaultTransform = cache.TransformStripManagedFields()
	base.ByObject = map[client.Object]cache.ByObject{
		&corev1.Pod{}: {
			Label:     selector,
			Field:     succeededSelector(),
			Transform: podTransform,
		},
	}
	return cache.New(cfg, base)
}

// Events are the pods arriving in and leaving the caches, for a source.Channel that wakes
// their accounts.
func (l *LatePods) Events() <-chan event.GenericEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.eventsLocked()
}

func (l *LatePods) eventsLocked() chan event.GenericEvent {
	if l.events == nil {
		l.events = make(chan event.GenericEvent, 1024)
	}
	return l.events
}

// Start runs the caches until ctx ends, stopping every one unread for the idle time.
func (l *LatePods) Start(ctx context.Context) error {
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
	tick := time.NewTicker(l.idle() / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			l.stopIdle()
		}
	}
}

// stopIdle stops the caches unread for the idle time.
func (l *LatePods) stopIdle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid, j := range l.jobs {
		if l.now().Sub(j.lastRead) >= l.idle() {
			j.stop()
			delete(l.jobs, uid)
		}
	}
}

// Running is how many Jobs' caches run.
func (l *LatePods) Running() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.jobs)
}

// errLatePodsNotStarted is returned before Start: the reconcile is retried.
var errLatePodsNotStarted = errors.New("the cache of late Jobs' pods has not started")

// SucceededPods are job's succeeded pods, from its cache, started (and synced) on the
// first read. The pods are the cache's: read only.
func (l *LatePods) SucceededPods(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	c, err := l.cacheOf(job)
	if err != nil {
		return nil, err
	}
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("waiting for the pods of Job %s/%s: %w", job.Namespace, job.Name, ctx.Err())
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(job.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// cacheOf is job's cache, created and started if it does not run.
func (l *LatePods) cacheOf(job *batchv1.Job) (cache.Cache, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		return nil, errLatePodsNotStarted
	}
	if j, ok := l.jobs[job.UID]; ok {
		j.lastRead = l.now()
		return j.cache, nil
	}
	c, err := l.NewCache(job)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(l.ctx)
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		stop()
		return nil, err
	}
	events := l.eventsLocked()
	send := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(client.Object); ok {
			select {
			case events <- event.GenericEvent{Object: o}:
			case <-ctx.Done():
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: send, DeleteFunc: send}); err != nil {
		stop()
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if l.jobs == nil {
		l.jobs = map[types.UID]*lateJob{}
	}
	l.jobs[job.UID] = &lateJob{cache: c, stop: stop, lastRead: l.now()}
	return c, nil
}

func (l *LatePods) idle() time.Duration {
	if l.Idle > 0 {
		return l.Idle
	}
	return LatePodsIdle
}

func (l *LatePods) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}
