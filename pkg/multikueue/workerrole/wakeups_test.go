package workerrole

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/controller"
	"batchledger.dev/batchledger/pkg/scheme"
)

// startWorkerRole runs the worker role's controllers as runWorker sets them up (Capture,
// with its releaser, and JobRecorder) on a manager whose informers are fakes the test
// drives (no event comes but those it sends), reading and writing through c. Every hold
// in a namespace being deleted ends within grace of the deletion's start.
func startWorkerRole(t *testing.T, c client.Client, grace time.Duration) *fakeInformers {
	t.Helper()
	s := scheme.Must()
	informers := &fakeInformers{FakeInformers: &informertest.FakeInformers{Scheme: s}}
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme: s,
		MapperProvider: func(*rest.Config, *http.Client) (apimeta.RESTMapper, error) {
			return apimeta.NewDefaultRESTMapper(nil), nil
		},
		NewCache:               func(*rest.Config, cache.Options) (cache.Cache, error) { return informers, nil },
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	capture := &Capture{Client: c, Releaser: &controller.PodReleaser{Client: c, Recorders: Recorders{c}, NamespaceGrace: grace}}
	if err := capture.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	jobs := &JobRecorder{Client: c, NamespaceGrace: grace}
	if err := jobs.SetupWithManager(mgr, capture.ExpireJobs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return informers
}

// fakeInformers are a cache whose informers the test drives (drivenInformer), one per
// kind: a metadata-only watch (builder.OnlyMetadata) listens to its kind's. The rest is
// controller-runtime's fake, which no controller here reads.
type fakeInformers struct {
	*informertest.FakeInformers
	mu        sync.Mutex
	informers map[schema.GroupVersionKind]*drivenInformer
}

func (f *fakeInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return f.informerFor(obj)
}

// informerFor is the informer of obj's kind.
func (f *fakeInformers) informerFor(obj client.Object) (*drivenInformer, error) {
	gvk, err := apiutil.GVKForObject(obj, f.Scheme)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.informers == nil {
		f.informers = map[schema.GroupVersionKind]*drivenInformer{}
	}
	if f.informers[gvk] == nil {
		f.informers[gvk] = &drivenInformer{}
	}
	return f.informers[gvk], nil
}

// drivenInformer is a synced informer that holds nothing and delivers the updates the
// test sends to every handler added, safely while controllers add theirs.
type drivenInformer struct {
	mu       sync.Mutex
	handlers []toolscache.ResourceEventHandler
}

var _ cache.Informer = &drivenInformer{}

type synced struct{}

func (synced) HasSynced() bool { return true }

func (i *drivenInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlers = append(i.handlers, h)
	return synced{}, nil
}

func (i *drivenInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, _ time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

func (i *drivenInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, _ toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

func (i *drivenInformer) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error {
	return nil
}
func (i *drivenInformer) AddIndexers(toolscache.Indexers) error { return nil }
func (i *drivenInformer) HasSynced() bool                       { return true }
func (i *drivenInformer) IsStopped() bool                       { return false }

// Update sends every handler an update of old to new.
func (i *drivenInformer) Update(old, new any) {
	i.mu.Lock()
	handlers := slices.Clone(i.handlers)
	i.mu.Unlock()
	for _, h := range handlers {
		h.OnUpdate(old, new)
	}
}

// refusedRecords refuses every record the worker role writes, as an admission policy
// that does not know its ServiceAccount would; a create in a namespace being deleted
// with the cause the API server gives (NamespaceLifecycle).
var refusedRecords = interceptor.Funcs{
	Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		switch obj.(type) {
		case *v1alpha1.WorkerResult, *v1alpha1.WorkerJob:
		default:
			return c.Create(ctx, obj, opts...)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns); err == nil && ns.DeletionTimestamp != nil {
			err := apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("records").GroupResource(), obj.GetName(),
				errors.New("unable to create new content in namespace because it is being terminated"))
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
				metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"})
			return err
		}
		return apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("records").GroupResource(), obj.GetName(), errors.New("denied by policy"))
	},
}

// TestWorkerRoleWakesWhatItHolds: the worker role's controllers are woken by the events
// that may let a held object go, as the manager's are. The start of a namespace's
// deletion wakes the pods and Jobs held there, whose hold it bounds: a pod deleted before
// it finished (its kubelet silent) or a deleted Job whose record cannot be written sends
// no event of its own when its namespace goes, and would keep the namespace for MaxHold
// (24h) after its deletion. A held Job whose JobSet labels were taken off is still
// watched, and let go.
func TestWorkerRoleWakesWhatItHolds(t *testing.T) {
	now := time.Now()
	live := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	deleting := live.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	nsDeleting := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Finalizers: []string{"example.com/keep"},
		DeletionTimestamp: &metav1.Time{Time: now}}}
	nsLive := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	heldChild := child(copyOfJS().Obj(), 2).Finalizers(v1alpha1.WorkerJobFinalizer).
		Annotation(v1alpha1.AnnotationWorkload, "jobset-js-f2331").Deleting(now.Add(-time.Hour))
	relabelled := heldChild.Obj()
	for _, l := range []string{"jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name"} {
		delete(relabelled.Labels, l)
	}
	for _, tc := range []struct {
		name string
		// objs are what the API server holds; held is the one expected let go.
		objs []client.Object
		held client.Object
		// send is the watch event, of kind like, the worker role is sent.
		like     client.Object
		old, new metav1.Object
	}{
		{
			name: "a pod deleted before it finished, its namespace's deletion starting",
			objs: []client.Object{nsDeleting},
			held: heldPod(copyOfJ().Obj()).Phase(corev1.PodRunning).Deleting(now.Add(-time.Hour)).Obj(),
			like: live, old: live, new: deleting,
		},
		{
			name: "a succeeded pod whose record cannot be written, its namespace's deletion starting",
			objs: []client.Object{nsDeleting},
			held: heldPod(copyOfJ().Obj()).Succeeded(now.Add(-time.Hour), `{"version":"batchledger.dev/v1"}`).Deleting(now.Add(-time.Hour)).Obj(),
			like: live, old: live, new: deleting,
		},
		{
			name: "a deleted Job whose record cannot be written, its namespace's deletion starting",
			objs: []client.Object{nsDeleting, copyOfJS().Obj()},
			held: heldChild.Obj(),
			like: live, old: live, new: deleting,
		},
		{
			name: "a deleted Job whose JobSet labels were taken off",
			objs: []client.Object{nsLive, copyOfJS().Obj()},
			held: relabelled,
			like: &batchv1.Job{}, old: relabelled, new: relabelled,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Must()).WithObjects(append(tc.objs, tc.held)...).
				WithInterceptorFuncs(refusedRecords).Build()
			informers := startWorkerRole(t, c, time.Millisecond)
			inf, err := informers.informerFor(tc.like)
			if err != nil {
				t.Fatal(err)
			}
			// Sent until the object is let go: the controllers may not listen yet.
			deadline := time.Now().Add(10 * time.Second)
			for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				inf.Update(tc.old, tc.new)
				obj := tc.held.DeepCopyObject().(client.Object)
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.held), obj); apierrors.IsNotFound(err) ||
					err == nil && !slices.ContainsFunc(obj.GetFinalizers(), func(f string) bool {
						return f == v1alpha1.ResultFinalizer || f == v1alpha1.WorkerJobFinalizer
					}) {
					return
				}
			}
			t.Errorf("%s still held 10s after the event", client.ObjectKeyFromObject(tc.held))
		})
	}
}
