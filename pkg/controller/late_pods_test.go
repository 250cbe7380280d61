package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// fakeJobCache stands in for one late Job's pod cache: reads go to a fake client, the
// informer records its handlers, and Start runs until its context ends.
type fakeJobCache struct {
	cache.Cache
	reader client.Reader

	mu       sync.Mutex
	handlers []toolscache.ResourceEventHandler
	stopped  chan struct{}
}

func newFakeJobCache(reader client.Reader) *fakeJobCache {
	return &fakeJobCache{reader: reader, stopped: make(chan struct{})}
}

func (c *fakeJobCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return fakeInformer{c: c}, nil
}

func (c *fakeJobCache) Start(ctx context.Context) error {
	<-ctx.Done()
	close(c.stopped)
	return nil
}

func (c *fakeJobCache) WaitForCacheSync(context.Context) bool { return true }

func (c *fakeJobCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// arrive tells the cache's handlers that obj entered it, as the informer does.
func (c *fakeJobCache) arrive(obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.handlers {
		h.OnAdd(obj, false)
	}
}

type fakeInformer struct {
	cache.Informer
	c *fakeJobCache
}

func (i fakeInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.c.mu.Lock()
	defer i.c.mu.Unlock()
	i.c.handlers = append(i.c.handlers, h)
	return nil, nil
}

// countingReader fails every List and counts them: the API server that a late Job's
// pods must no longer be listed from.
type countingReader struct {
	client.Reader
	lists int
}

// List counts the LISTs of pods; the others (a Workload the cache does not hold) find
// nothing.
func (r *countingReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		r.lists++
	}
	return nil
}

// startedLatePods is a LatePods whose caches are created by newCache, started under a
// context the test ends.
func startedLatePods(t *testing.T, now *time.Time, newCache func(*batchv1.Job) (cache.Cache, error)) *LatePods {
	t.Helper()
	l := &LatePods{NewCache: newCache, Now: func() time.Time { return *now }}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = l.Start(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); ; {
		l.mu.Lock()
		started := l.ctx != nil
		l.mu.Unlock()
		if started {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatal("LatePods did not start")
		}
		time.Sleep(time.Millisecond)
	}
}

// A Job that started before its account (its pods carry no scope label) has its
// succeeded pods read from one cache of its own, created on the first reconcile and read
// by every later one: the API server is never listed per reconcile, so an account's cost
// follows its pods, not reconciles × pods. A pod that succeeds later is counted once it
// reaches the cache.
func TestLateJobPodsComeFromOneCacheOfTheJob(t *testing.T) {
	job := wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").ResourceVersion("1").Completed("0", 1).Obj()
	pod0 := wrappers.MakeIndexPod(job, "j-0", 0).Succeeded(testNow.Add(-time.Minute), "").Obj()
	pod1 := wrappers.MakeIndexPod(job, "j-1", 1).Succeeded(testNow, "").Obj()
	store := newFixture(t, hooks{}, pod0)
	now := testNow
	var created []types.UID
	l := startedLatePods(t, &now, func(job *batchv1.Job) (cache.Cache, error) {
		created = append(created, job.UID)
		return newFakeJobCache(store.c), nil
	})
	api := &countingReader{}
	r := &Reconciler{Client: newFixture(t, hooks{}, job).c, APIReader: api, LatePods: l}
	ba := accountOfJ().Obj()
	m := account.Compile(ba.Namespace, &ba.Spec)
	for i, want := range []int{1, 1, 2} {
		if i == 2 {
			if err := store.c.Create(context.Background(), pod1); err != nil {
				t.Fatal(err)
			}
		}
		o, err := r.observeTarget(context.Background(), ba.Namespace, m.Targets[0], kinds.Followed{}, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(o.obs.SuccessfulPods); got != want {
			t.Fatalf("reconcile %d: %d successful pods, want %d", i+1, got, want)
		}
	}
	if len(created) != 1 || created[0] != job.UID {
		t.Errorf("caches created for %v, want one, for the Job's UID %s", created, job.UID)
	}
	if api.lists != 0 {
		t.Errorf("%d LISTs of pods from the API server, want none", api.lists)
	}
}

// A pod entering a late Job's cache (it succeeded, or was there when the cache started)
// or leaving it wakes the Job's accounts: the Job controller's status update that counts
// it may have reached the account first.
func TestLateJobPodArrivalIsAnEvent(t *testing.T) {
	job := wrappers.MakeJob("j", "ns").Indexed(1).UID("j-uid").Obj()
	pod := wrappers.MakeIndexPod(job, "j-0", 0).Succeeded(testNow, "").Obj()
	now := testNow
	c := newFakeJobCache(newFixture(t, hooks{}).c)
	l := startedLatePods(t, &now, func(*batchv1.Job) (cache.Cache, error) { return c, nil })
	if _, err := l.SucceededPods(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	go c.arrive(pod)
	select {
	case e := <-l.Events():
		if e.Object.GetName() != pod.Name {
			t.Errorf("event for %s, want %s", e.Object.GetName(), pod.Name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event for the pod that arrived")
	}
}

// A late Job's cache unread for the idle time is stopped (its watch ends); reading the
// Job again starts a new one.
func TestIdleLateJobCacheStops(t *testing.T) {
	job := &batchv1.Job{}
	job.Namespace, job.Name, job.UID = "ns", "j", "j-uid"
	now := testNow
	var caches []*fakeJobCache
	l := startedLatePods(t, &now, func(*batchv1.Job) (cache.Cache, error) {
		c := newFakeJobCache(newFixture(t, hooks{}).c)
		caches = append(caches, c)
		return c, nil
	})
	read := func() {
		t.Helper()
		if _, err := l.SucceededPods(context.Background(), job); err != nil {
			t.Fatal(err)
		}
	}
	read()
	now = now.Add(LatePodsIdle - time.Second)
	l.stopIdle()
	if l.Running() != 1 {
		t.Fatalf("%d caches run before the idle time, want 1", l.Running())
	}
	now = now.Add(time.Second)
	l.stopIdle()
	if l.Running() != 0 {
		t.Fatalf("%d caches run after the idle time, want 0", l.Running())
	}
	select {
	case <-caches[0].stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle cache was not stopped")
	}
	read()
	if len(caches) != 2 || l.Running() != 1 {
		t.Errorf("%d caches created, %d running after a new read; want 2 and 1", len(caches), l.Running())
	}
}
