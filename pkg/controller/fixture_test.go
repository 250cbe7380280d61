package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The reconcilers' unit tests run them against controller-runtime's fake client, as the
// Kubernetes Job controller's job_controller_test.go runs syncJob against fake clients: a
// case lists the objects the cache holds, the failures the API server returns (hooks),
// and what must have been written and emitted afterwards.

// testNow is the clock of the reconcile tests.
var testNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// trainJobGVK is the kind a TrainJob's controller references name.
var trainJobGVK = trainer.GroupVersion.WithKind(trainer.TrainJobKind)

// emitted is one event a reconciler emitted, with the kind and name of the object it
// regards.
type emitted struct {
	Kind, Name, Type, Reason, Note string
}

func (e emitted) String() string {
	return fmt.Sprintf("%s/%s %s %s: %s", e.Kind, e.Name, e.Type, e.Reason, e.Note)
}

// Eventf records one event (client-go's FakeRecorder keeps only its type, reason and
// note), in the fixture's sequence of writes too, so a test can tell what it followed.
func (f *fixture) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	o := regarding.(client.Object)
	e := emitted{Kind: reflect.TypeOf(o).Elem().Name(), Name: o.GetName(), Type: eventtype, Reason: reason, Note: fmt.Sprintf(note, args...)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	f.writes = append(f.writes, "event "+e.Kind+"/"+e.Name+" "+e.Reason)
}

// eventsOf returns the events regarding objects of kind, as "<type> <reason>", in order.
func (f *fixture) eventsOf(kind string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		if e.Kind == kind {
			out = append(out, e.Type+" "+e.Reason)
		}
	}
	return out
}

// reset forgets the writes and events so far: what a test measures starts after it.
func (f *fixture) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes, f.events, f.applies = nil, nil, nil
}

// hooks stand in for API server failures: each, when set, runs before the write it names
// reaches the fake client; a non-nil error is returned to the reconciler instead.
type hooks struct {
	statusUpdate func(obj client.Object) error
	create       func(obj client.Object) error
	update       func(obj client.Object) error
	patch        func(obj client.Object) error
	apply        func(ac *kueueac.WorkloadApplyConfiguration, c client.Client) error
	// list, when set, may fail a list before it is served.
	list func(list client.ObjectList) error
	// listWorkloads, when set, changes what a Workload list returns: a stale cache.
	listWorkloads func(list *kueue.WorkloadList)
}

// applied is one server-side apply of a Workload's status, with its options.
type applied struct {
	ac    *kueueac.WorkloadApplyConfiguration
	owner string
	force bool
}

// fixture is a fake API server and cache holding a test's objects, with the controller's
// field indexes, and the record of the writes the reconcilers sent to it, in order.
type fixture struct {
	c client.WithWatch

	mu sync.Mutex
	// writes are "<verb> <Kind>/<name>" of every write sent, failed ones too, and
	// "event <Kind>/<name> <reason>" of every event, in order.
	writes  []string
	events  []emitted
	applies []applied
	// ledger is the signing key of the fixture's manager: every reconciler of the
	// fixture is the same process, so each verifies the chunks the others signed.
	ledger Ledger
}

func (f *fixture) wrote(verb string, obj client.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, verb+" "+reflect.TypeOf(obj).Elem().Name()+"/"+obj.GetName())
}

// writesOf are the writes of verb, in order.
func (f *fixture) writesOf(verb string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, w := range f.writes {
		if strings.HasPrefix(w, verb+" ") {
			out = append(out, strings.TrimPrefix(w, verb+" "))
		}
	}
	return out
}

func newFixture(t *testing.T, h hooks, objs ...client.Object) *fixture {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	funcs := interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			f.wrote("create", obj)
			if h.create != nil {
				if err := h.create(obj); err != nil {
					return err
				}
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			f.wrote("update", obj)
			if h.update != nil {
				if err := h.update(obj); err != nil {
					return err
				}
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			f.wrote("patch", obj)
			if h.patch != nil {
				if err := h.patch(obj); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if h.list != nil {
				if err := h.list(list); err != nil {
					return err
				}
			}
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if wls, ok := list.(*kueue.WorkloadList); ok && h.listWorkloads != nil {
				h.listWorkloads(wls)
			}
			return nil
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			f.wrote(sub+"-update", obj)
			if h.statusUpdate != nil {
				if err := h.statusUpdate(obj); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			ac := obj.(*kueueac.WorkloadApplyConfiguration)
			o := &client.SubResourceApplyOptions{}
			o.ApplyOpts(opts)
			f.mu.Lock()
			f.writes = append(f.writes, sub+"-apply Workload/"+*ac.GetName())
			f.applies = append(f.applies, applied{ac: ac, owner: o.FieldManager, force: o.Force != nil && *o.Force})
			f.mu.Unlock()
			if h.apply != nil {
				if err := h.apply(ac, c); err != nil {
					return err
				}
			}
			return applyWorkloadStatus(ctx, c, ac)
		},
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.BatchAccount{}, &kueue.Workload{}).
		WithInterceptorFuncs(funcs)
	f.c = withIndexes(t, b).Build()
	return f
}

// reconciler is the BatchAccount reconciler of the fixture, at testNow.
func (f *fixture) reconciler() *Reconciler {
	return &Reconciler{Client: f.c, APIReader: f.c, Recorder: f, Now: func() time.Time { return testNow }, Ledger: &f.ledger}
}

// reconcile runs one reconcile of account name in namespace ns.
func (f *fixture) reconcile(name string) (ctrl.Result, error) {
	return f.reconciler().Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}})
}

// account reads account name back from the fake API server.
func (f *fixture) account(t *testing.T, name string) *v1alpha1.BatchAccount {
	t.Helper()
	var ba v1alpha1.BatchAccount
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &ba); err != nil {
		t.Fatal(err)
	}
	return &ba
}

// retried is whether a reconcile result makes controller-runtime run it again: an error
// (with backoff) or an explicit requeue.
func retried(res ctrl.Result, err error) bool {
	return err != nil || !res.IsZero()
}

// applyWorkloadStatus applies the conditions of ac to the Workload's status as the API
// server does, where the fake client cannot: without Kueue's schema it would replace the
// whole list, where the API server merges it by condition type (listType=map), keeping
// Kueue's own conditions, and removes the conditions of ours that ac no longer names
// (our field manager is their only owner). A UID in ac is a precondition: a Workload of
// that name with another UID (deleted and recreated) fails with a Conflict.
func applyWorkloadStatus(ctx context.Context, c client.Client, ac *kueueac.WorkloadApplyConfiguration) error {
	var wl kueue.Workload
	if err := c.Get(ctx, client.ObjectKey{Namespace: *ac.GetNamespace(), Name: *ac.GetName()}, &wl); err != nil {
		return err
	}
	if ac.UID != nil && *ac.UID != wl.UID {
		return apierrors.NewConflict(kueue.GroupVersion.WithResource("workloads").GroupResource(), wl.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *ac.UID, wl.UID))
	}
	named := map[string]bool{}
	if ac.Status != nil {
		for _, cond := range ac.Status.Conditions {
			named[*cond.Type] = true
		}
	}
	for _, c := range slices.Clone(wl.Status.Conditions) {
		if v1alpha1.IsWorkloadCondition(c.Type) && !named[c.Type] {
			apimeta.RemoveStatusCondition(&wl.Status.Conditions, c.Type)
		}
	}
	if ac.Status != nil {
		for _, cond := range ac.Status.Conditions {
			apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
				Type: *cond.Type, Status: *cond.Status, Reason: *cond.Reason, Message: *cond.Message,
				ObservedGeneration: *cond.ObservedGeneration, LastTransitionTime: *cond.LastTransitionTime,
			})
		}
	}
	return c.Status().Update(ctx, &wl)
}

// sweptAndReconciled runs sweep until it has sent want objects, reconciles each as it
// comes, fails the test on any more within a moment, and returns the keys sent, sorted.
func sweptAndReconciled(t *testing.T, what string, want int, sweep func(context.Context, chan<- event.GenericEvent) error,
	reconcile func(context.Context, ctrl.Request) (ctrl.Result, error)) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan event.GenericEvent)
	done := make(chan error, 1)
	go func() { done <- sweep(ctx, out) }()
	var sent []string
	for range want {
		select {
		case e := <-out:
			key := client.ObjectKeyFromObject(e.Object)
			sent = append(sent, key.String())
			if res, err := reconcile(context.Background(), ctrl.Request{NamespacedName: key}); retried(res, err) {
				t.Fatalf("reconcile(%s) = %+v, %v", key, res, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the sweep sent %v, want %d %s", sent, want, what)
		}
	}
	select {
	case e := <-out:
		t.Errorf("the sweep also sent %s", client.ObjectKeyFromObject(e.Object))
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	slices.Sort(sent)
	return sent
}

// makeTJ is TrainJob tj (UID tj-uid) of the runtime torch-distributed; finish it on the
// wrapper.
func makeTJ() *wrappers.TrainJobWrapper {
	return wrappers.MakeTrainJob("tj", "ns", "torch-distributed").UID("tj-uid")
}

// jobSetOf is a JobSet of TrainJob tj's name, of UID uid and controlled by tj, with no
// replicatedJob: add them on the wrapper.
func jobSetOf(tj *trainer.TrainJob, uid string) *wrappers.JobSetWrapper {
	return wrappers.MakeJobSet(tj.Name, tj.Namespace).ControlledBy(tj, trainJobGVK, uid)
}

// renderedTrainJob is TrainJob tj (UID tj-uid, two nodes of the runtime
// torch-distributed), created three hours before testNow and running, with what Trainer
// and Kueue make for it: the JobSets it renders and tj's Workload.
type renderedTrainJob struct{ tj *trainer.TrainJob }

// newRenderedTrainJob builds TrainJob tj.
func newRenderedTrainJob() renderedTrainJob {
	w := makeTJ().NumNodes(2)
	w.CreationTimestamp = metav1.NewTime(testNow.Add(-3 * time.Hour))
	return renderedTrainJob{tj: w.Obj()}
}

// jobSet is JobSet tj of one replicatedJob node, as Trainer renders it for tj: of UID
// uid, created at created. Its children are nodeChild's.
func (r renderedTrainJob) jobSet(uid string, created time.Time) *jobsetapi.JobSet {
	js := jobSetOf(r.tj, uid).ReplicatedJob(wrappers.MakeReplicatedJob("node").Obj()).Obj()
	js.CreationTimestamp = metav1.NewTime(created)
	return js
}

// workload is tj's Workload trainjob-tj-1a2b3 (UID wl-uid) as Kueue makes it: controlled
// by tj and labelled with tj's UID; admit or finish it on the wrapper.
func (r renderedTrainJob) workload() *wrappers.WorkloadWrapper {
	return wrappers.MakeWorkload("trainjob-tj-1a2b3", r.tj.Namespace).UID("wl-uid").
		ControlledBy(r.tj, trainJobGVK).Label(kueueconstants.JobUIDLabel, string(r.tj.UID))
}

// nodeChild is child 0 (attempt 0) of replicatedJob node of JobSet js: Job <js>-node-0
// of UID uid, indexed with two completions, it and its pods in the coverage scope.
func nodeChild(js *jobsetapi.JobSet, uid string) *wrappers.JobWrapper {
	return wrappers.MakeJob(js.Name+"-node-0", js.Namespace).UID(uid).Indexed(2).
		Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		JobSetChild(js, "node", 0, 0)
}

// forgedChild is a namespace editor's Job <js>-<rj>-0 (UID x-uid, indexed with two
// completions, both complete at done, its pods in scope) named, labelled and
// controller-referenced as child 0 of replicatedJob rj of a JobSet js of UID jsUID,
// which need not exist. The reference's apiVersion is one the garbage collector cannot
// resolve, so it keeps the Job whatever becomes of js.
func forgedChild(js, rj string, jsUID types.UID, scope string, done time.Time) *batchv1.Job {
	named := wrappers.MakeJobSet(js, "ns").Obj()
	named.UID = jsUID
	x := wrappers.MakeJob(js+"-"+rj+"-0", "ns").Indexed(2).UID("x-uid").PodLabel(v1alpha1.LabelScope, scope).
		JobSetChild(named, rj, 0, 0).Completed("0-1", 2).Complete(done).Obj()
	x.OwnerReferences[0].APIVersion = "jobset.x-k8s.io/v9"
	return x
}

// reportedPods are n index pods f-0..f-<n-1> of job, index i each, held by the result
// finalizer and succeeded at succeeded with a report for shard s<i>.
func reportedPods(t *testing.T, job *batchv1.Job, n int, succeeded time.Time) []client.Object {
	t.Helper()
	pods := make([]client.Object, 0, n)
	for i := range n {
		pods = append(pods, wrappers.MakeIndexPod(job, fmt.Sprintf("f-%d", i), i).Finalizers(v1alpha1.ResultFinalizer).
			Succeeded(succeeded, report(t, fmt.Sprintf("s%d", i))).Obj())
	}
	return pods
}
