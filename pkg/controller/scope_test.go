package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// selectedCache is the manager's cache over a fake API server: of Jobs and Workloads it
// holds only those the label selectors of CacheOptions select, as the API server serves
// the cache's label-selected LIST and watch.
type selectedCache struct{ client.Client }

// selects reports whether CacheOptions' selector for obj's type (if any) selects it.
func selects(obj client.Object) bool {
	for o, by := range CacheOptions().ByObject {
		if by.Label != nil && sameType(o, obj) {
			return by.Label.Matches(labels.Set(obj.GetLabels()))
		}
	}
	return true
}

func sameType(a, b client.Object) bool {
	switch a.(type) {
	case *batchv1.Job:
		_, ok := b.(*batchv1.Job)
		return ok
	case *kueue.Workload:
		_, ok := b.(*kueue.Workload)
		return ok
	}
	return false
}

func (c selectedCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if !selects(obj) {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return nil
}

func (c selectedCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	switch l := list.(type) {
	case *batchv1.JobList:
		l.Items = slices.DeleteFunc(l.Items, func(j batchv1.Job) bool { return !selects(&j) })
	case *kueue.WorkloadList:
		l.Items = slices.DeleteFunc(l.Items, func(wl kueue.Workload) bool { return !selects(&wl) })
	}
	return nil
}

// apiReads counts the reads of Jobs and Workloads sent to the API server.
type apiReads struct {
	client.Reader
	reads map[string]int
}

func (r *apiReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if n := typeName(obj); n != "" {
		r.reads["get "+n]++
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *apiReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if n := typeName(list); n != "" {
		r.reads["list "+n]++
	}
	return r.Reader.List(ctx, list, opts...)
}

func typeName(o any) string {
	switch o.(type) {
	case *batchv1.Job:
		return "Job"
	case *batchv1.JobList:
		return "JobList"
	case *kueue.WorkloadList:
		return "WorkloadList"
	}
	return "" // pods: the late Job's pods, another test's concern
}

// TestTargetsOutsideTheCache: the manager's cache holds only the Jobs and Workloads
// labelled with the opt-in scope. A target's Job or Workload it does not hold is read
// from the API server (a Job by name, a JobSet child by its JobSet's labels, a Workload
// by Kueue's job-uid label), labelled on its metadata so that the cache holds it from
// then on, and observed in the same reconcile; what the cache holds is never read live.
func TestTargetsOutsideTheCache(t *testing.T) {
	suspended := func(w *wrappers.JobWrapper) *wrappers.JobWrapper { return w.Suspend(true) }
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	js.UID = "ts-uid"
	type want struct {
		// reads are the reads sent to the API server over the observes.
		reads map[string]int
		// jobMeta, jobTemplate, workload: the scope labels afterwards ("" none).
		jobMeta, jobTemplate, workload string
		// found: the target's Job and Workload were observed, every time.
		jobFound, workloadFound bool
	}
	cases := []struct {
		name     string
		job      *batchv1.Job
		workload *kueue.Workload
		ref      func(*wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper
		results  bool
		deleted  bool
		// observes is how many reconciles observe the target (default 1).
		observes int
		want     want
	}{
		{
			name: "a suspended Job without the label: read by name, labelled on its metadata and template",
			job:  suspended(wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid")).Obj(),
			want: want{reads: map[string]int{"get Job": 1, "list WorkloadList": 1}, jobMeta: v1alpha1.ScopeCoverage, jobTemplate: v1alpha1.ScopeCoverage, jobFound: true},
		},
		{
			name:    "a running Job without the label: its metadata labelled, its template keeps its scope",
			job:     wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").StartTime(testNow).Obj(),
			results: true,
			want:    want{reads: map[string]int{"get Job": 1, "list WorkloadList": 1}, jobMeta: v1alpha1.ScopeResults, jobFound: true},
		},
		{
			name:     "once labelled, the Job is read from the cache: one live read over three reconciles",
			job:      wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").StartTime(testNow).Obj(),
			observes: 3,
			want:     want{reads: map[string]int{"get Job": 1, "list WorkloadList": 1}, jobMeta: v1alpha1.ScopeCoverage, jobFound: true},
		},
		{
			name: "a labelled Job is the cache's: no live read of it",
			job:  wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(),
			want: want{reads: map[string]int{"list WorkloadList": 1}, jobMeta: v1alpha1.ScopeCoverage, jobFound: true},
		},
		{
			name: "a JobSet child without the label: listed by its JobSet's labels, labelled",
			job:  wrappers.MakeJob("ts-workers-0", "ns").Indexed(2).UID("c-uid").StartTime(testNow).JobSetChild(js, "workers", 0, 0).Obj(),
			ref: func(b *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
				return b.AssignJobSet("ts", "workers", 0, "0-1", "0-1")
			},
			want: want{reads: map[string]int{"list JobList": 1, "list WorkloadList": 1}, jobMeta: v1alpha1.ScopeCoverage, jobFound: true},
		},
		{
			name:     "no Job at all: one live read per reconcile, nothing labelled",
			observes: 2,
			want:     want{reads: map[string]int{"get Job": 2}},
		},
		{
			name:    "a Job target seen deleted is not looked for",
			deleted: true,
			want:    want{reads: map[string]int{}},
		},
		{
			name: "a Workload without the label: listed by Kueue's job-uid label, labelled",
			job:  wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj(),
			workload: wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(withUID(wrappers.MakeJob("j", "ns").Obj(), "j-uid")).
				Label(kueueconstants.JobUIDLabel, "j-uid").Obj(),
			results:  true,
			observes: 2,
			want: want{reads: map[string]int{"list WorkloadList": 1}, jobMeta: v1alpha1.ScopeResults,
				workload: v1alpha1.ScopeResults, jobFound: true, workloadFound: true},
		},
		{
			name: "a Workload Kueue labelled (labelKeysToCopy) is the cache's: no live read",
			job:  wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(),
			workload: wrappers.MakeWorkload("job-j", "ns").UID("wl-uid").ForJob(withUID(wrappers.MakeJob("j", "ns").Obj(), "j-uid")).
				Label(kueueconstants.JobUIDLabel, "j-uid").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(),
			want: want{reads: map[string]int{}, jobMeta: v1alpha1.ScopeCoverage, workload: v1alpha1.ScopeCoverage,
				jobFound: true, workloadFound: true},
		},
		{
			name:     "no Workload (a Job Kueue does not manage): one live read, not again within the retry",
			job:      wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(),
			observes: 3,
			want:     want{reads: map[string]int{"list WorkloadList": 1}, jobMeta: v1alpha1.ScopeCoverage, jobFound: true},
		},
		{
			name: "a Workload carrying the Job's job-uid label that the Job does not control is not its Workload",
			job:  wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(),
			workload: wrappers.MakeWorkload("forged", "ns").UID("wl-uid").ForJob(withUID(wrappers.MakeJob("other", "ns").Obj(), "other-uid")).
				Label(kueueconstants.JobUIDLabel, "j-uid").Obj(),
			want: want{reads: map[string]int{"list WorkloadList": 1}, jobMeta: v1alpha1.ScopeCoverage, jobFound: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{js}
			if tc.job != nil {
				objs = append(objs, tc.job)
			}
			if tc.workload != nil {
				objs = append(objs, tc.workload)
			}
			f := newFixture(t, hooks{}, objs...)
			api := &apiReads{Reader: f.c, reads: map[string]int{}}
			m := newMetrics(prometheus.NewRegistry())
			r := &Reconciler{Client: selectedCache{f.c}, APIReader: api, Now: func() time.Time { return testNow }, Metrics: m}
			if tc.deleted {
				r.deletedJobs.add(wrappers.MakeJob("j", "ns").UID("old-uid").Obj(), testNow)
			}
			b := wrappers.MakeBatchAccount("acct", "ns").Shards("A", "B")
			if tc.ref != nil {
				b = tc.ref(b)
			} else {
				b = b.AssignJob("j", "0-1", "A", "B")
			}
			if tc.results {
				b = b.RequireResults("true")
			}
			ba := b.Obj()
			target := account.Compile(ba.Namespace, &ba.Spec).Targets[0]
			for i := range max(tc.observes, 1) {
				o, err := r.observeTarget(context.Background(), ba.Namespace, target, kinds.Followed{}, tc.results)
				if err != nil {
					t.Fatal(err)
				}
				if (o.job != nil) != tc.want.jobFound || (o.workload != nil) != tc.want.workloadFound {
					t.Fatalf("observe %d: Job found %v, Workload found %v; want %v, %v", i+1, o.job != nil, o.workload != nil, tc.want.jobFound, tc.want.workloadFound)
				}
				if o.job != nil {
					r.stampTarget(context.Background(), ba, target.Ref, o.job)
				}
			}
			if diff := cmp.Diff(tc.want.reads, api.reads); diff != "" {
				t.Errorf("reads from the API server (-want +got):\n%s", diff)
			}
			if tc.job != nil {
				var job batchv1.Job
				if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.job), &job); err != nil {
					t.Fatal(err)
				}
				if got := job.Labels[v1alpha1.LabelScope]; got != tc.want.jobMeta {
					t.Errorf("scope label on the Job's metadata = %q, want %q", got, tc.want.jobMeta)
				}
				if got := job.Spec.Template.Labels[v1alpha1.LabelScope]; got != tc.want.jobTemplate {
					t.Errorf("scope label on the Job's template = %q, want %q", got, tc.want.jobTemplate)
				}
				if !selects(&job) {
					t.Error("the Job is not in the cache afterwards")
				}
			}
			if tc.workload != nil {
				var wl kueue.Workload
				if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.workload), &wl); err != nil {
					t.Fatal(err)
				}
				if got := wl.Labels[v1alpha1.LabelScope]; got != tc.want.workload {
					t.Errorf("scope label on the Workload = %q, want %q", got, tc.want.workload)
				}
			}
			// The metrics count what was read live.
			if got, want := testutil.ToFloat64(m.LiveReads.WithLabelValues(cachedJob)), float64(tc.want.reads["get Job"]+tc.want.reads["list JobList"]); got != want {
				t.Errorf("%s{kind=Job} = %v, want %v", MetricLiveReads, got, want)
			}
			if got, want := testutil.ToFloat64(m.LiveReads.WithLabelValues(cachedWorkload)), float64(tc.want.reads["list WorkloadList"]); got != want {
				t.Errorf("%s{kind=Workload} = %v, want %v", MetricLiveReads, got, want)
			}
		})
	}
}

// TestLiveWorkloadRetry: an owner whose live read found no Workload is read again only
// once its Job's suspension changed (Kueue admitted the Workload made since) or
// liveWorkloadRetry passed; one found is forgotten.
func TestLiveWorkloadRetry(t *testing.T) {
	var m liveMisses
	if !m.due("a", true, testNow) {
		t.Fatal("an owner never read is not due")
	}
	m.missed("a", true, testNow)
	for _, tc := range []struct {
		name      string
		suspended bool
		after     time.Duration
		due       bool
	}{
		{"at once, the Job still suspended", true, 0, false},
		{"just before the retry", true, liveWorkloadRetry - time.Millisecond, false},
		{"at the retry", true, liveWorkloadRetry, true},
		{"at once, the Job unsuspended (Kueue admitted its Workload)", false, 0, true},
	} {
		if got := m.due("a", tc.suspended, testNow.Add(tc.after)); got != tc.due {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.due)
		}
	}
	m.found("a")
	if !m.due("a", true, testNow) {
		t.Error("an owner found is still held back")
	}
}

// TestSuspendedOwnerStampedBeforeItsChildren: a JobSet target whose JobSet has no child
// Job yet (queued in Kueue, or dispatched by MultiKueue, whose children exist only on the
// worker) and whose creation webhook did not stamp it gets its replicatedJob's template
// stamped by the account's reconcile while it is suspended, on its pod template only (the
// rest is immutable then); once it runs, its template is left alone. It is stamped too
// while Kueue's preemption holds it suspended after pods of its children ran: JobSet
// merges the replicatedJob's pod template labels into its children as it resumes them
// (and a restart creates them from it), so their next pods are held, while their
// earlier pods are read beside them (TestPreemptedJobKeepsItsPodsInSight).
func TestSuspendedOwnerStampedBeforeItsChildren(t *testing.T) {
	for _, tc := range []struct {
		name      string
		suspended bool
		// ran: its child Job exists, suspended after index 0 succeeded.
		ran  bool
		want string
	}{
		{name: "suspended, no child yet: stamped", suspended: true, want: v1alpha1.ScopeResults},
		{name: "running: left alone", suspended: false, want: ""},
		{name: "preempted after its child's pods ran: stamped", suspended: true, ran: true, want: v1alpha1.ScopeResults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := wrappers.MakeJob("", "ns").Indexed(2).Obj()
			js := wrappers.MakeJobSet("js", "ns").Suspend(tc.suspended).
				ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(1).Job(child).Obj()).Obj()
			js.UID = "js-uid"
			acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A", "B").
				AssignJobSet("js", "workers", 0, "0-1", "0-1").RequireResults("").Obj()
			objs := []client.Object{acct, js}
			if tc.ran {
				objs = append(objs, wrappers.MakeJob("js-workers-0", "ns").Indexed(2).UID("c-uid").Suspend(true).
					JobSetChild(js, "workers", 0, 0).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Completed("0", 1).Obj())
			}
			f := newFixture(t, hooks{}, objs...)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			var got jobsetapi.JobSet
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(js), &got); err != nil {
				t.Fatal(err)
			}
			rj := got.Spec.ReplicatedJobs[0]
			if pod := rj.Template.Spec.Template.Labels[v1alpha1.LabelScope]; pod != tc.want {
				t.Errorf("scope on the replicatedJob's pod template %q, want %q", pod, tc.want)
			}
			// JobSet's webhook refuses any other change of a suspended JobSet's templates.
			if !equality.Semantic.DeepEqual(rj.Template.ObjectMeta, js.Spec.ReplicatedJobs[0].Template.ObjectMeta) {
				t.Errorf("the Job template's metadata changed: %+v", rj.Template.ObjectMeta)
			}
		})
	}
}

// cachedReconciler is the fixture's reconciler reading as the manager does: what it
// reads first holds only the Jobs and Workloads carrying the scope label (selectedCache),
// the rest it must read from the API server.
func (f *fixture) cachedReconciler() *Reconciler {
	r := f.reconciler()
	r.Client = selectedCache{f.c}
	r.Metrics = newMetrics(prometheus.NewRegistry())
	return r
}

// TestUnfoundTargetIsLookedForAgain: an account naming a Job that no read finds comes
// back by itself (unfoundRecheck), since a Job created later without the scope label
// (the scope webhook failed open) sends the controller no event: after a quarter of its
// age, at least UnfoundRecheck (DefaultUnfoundRecheck when unset), at most
// MaxUnfoundRecheck unless that least is more. An account whose Job exists, or without
// an API reader that could find one, is not brought back.
func TestUnfoundTargetIsLookedForAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		age   time.Duration
		least time.Duration // Reconciler.UnfoundRecheck
		job   *batchv1.Job
		noAPI bool
		want  time.Duration
	}{
		{name: "just created", want: DefaultUnfoundRecheck},
		{name: "three minutes old", age: 3 * time.Minute, want: DefaultUnfoundRecheck},
		{name: "eight minutes old", age: 8 * time.Minute, want: 2 * time.Minute},
		{name: "a day old", age: 24 * time.Hour, want: MaxUnfoundRecheck},
		{name: "a minute old, at least 15 s", age: time.Minute, least: 15 * time.Second, want: 15 * time.Second},
		{name: "a day old, at least 10 minutes", age: 24 * time.Hour, least: 10 * time.Minute, want: 10 * time.Minute},
		{name: "its Job exists", age: time.Minute,
			job: wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").StartTime(testNow).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()},
		{name: "no API reader", age: time.Minute, noAPI: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A", "B").AssignJob("j", "0-1", "A", "B").Creation(testNow.Add(-tc.age)).Obj()
			objs := []client.Object{ba}
			if tc.job != nil {
				objs = append(objs, tc.job)
			}
			f := newFixture(t, hooks{}, objs...)
			r := f.cachedReconciler()
			r.UnfoundRecheck = tc.least
			if tc.noAPI {
				r.APIReader = nil
			}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ba)})
			if err != nil || res.RequeueAfter != tc.want {
				t.Errorf("reconcile = %+v, %v; want a recheck in %v", res, err, tc.want)
			}
		})
	}
}

// TestJobCreatedUnlabelledIsFoundAtTheRecheck: the account's Job is created after the
// account's first reconcile and without the scope label (the webhook failed open), so no
// event of it reaches the controller. The recheck the first reconcile asked for finds it
// at the API server, labels it so that the cache holds it from then on, and observes it;
// with its Job found, the account asks for no more rechecks.
func TestJobCreatedUnlabelledIsFoundAtTheRecheck(t *testing.T) {
	ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A", "B").AssignJob("j", "0-1", "A", "B").Creation(testNow).Obj()
	f := newFixture(t, hooks{}, ba)
	r := f.cachedReconciler()
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ba)}
	if res, err := r.Reconcile(context.Background(), req); err != nil || res.RequeueAfter != DefaultUnfoundRecheck {
		t.Fatalf("first reconcile = %+v, %v; want a recheck in %v", res, err, DefaultUnfoundRecheck)
	}
	if err := f.c.Create(context.Background(), wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").StartTime(testNow).Obj()); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Reconcile(context.Background(), req); err != nil || !res.IsZero() {
		t.Errorf("the recheck = %+v, %v; want no further recheck", res, err)
	}
	if tg := f.account(t, "acct").Status.Targets; len(tg) != 1 || !tg[0].Found || tg[0].UID != "j-uid" {
		t.Errorf("targets %+v; want Job j found", tg)
	}
	var job batchv1.Job
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "j"}, &job); err != nil {
		t.Fatal(err)
	}
	if got := job.Labels[v1alpha1.LabelScope]; got != v1alpha1.ScopeCoverage {
		t.Errorf("the Job's %s label = %q, want %q: the cache would not hold it", v1alpha1.LabelScope, got, v1alpha1.ScopeCoverage)
	}
}
