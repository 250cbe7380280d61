package controller

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	trainjobkind "batchledger.dev/batchledger/pkg/kinds/trainjob"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// fakeMapper maps every kind of s but those of notServed, as the RESTMapper of a cluster
// that serves everything else.
func fakeMapper(t *testing.T, s *runtime.Scheme, notServed ...OptionalAPI) apimeta.RESTMapper {
	t.Helper()
	m := apimeta.NewDefaultRESTMapper(nil)
	for gvk := range s.AllKnownTypes() {
		if slices.ContainsFunc(notServed, func(a OptionalAPI) bool { return a.GVK.GroupKind() == gvk.GroupKind() }) {
			continue
		}
		m.Add(gvk, apimeta.RESTScopeNamespace)
	}
	return m
}

// TestDiscoverAPIs: the manager's RESTMapper tells an API not served (a NoMatch) from
// one served, and an answer it cannot have is an error, not "not served".
func TestDiscoverAPIs(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	served, err := DiscoverAPIs(MapperLookup(fakeMapper(t, s, APIJobSet)), OptionalAPIs)
	if err != nil {
		t.Fatal(err)
	}
	if served.Served(APIJobSet) || !served.Served(APIWorkload) {
		t.Errorf("served = %s, want only JobSet not served", served)
	}
	if got := served.String(); got != "not served: jobset.x-k8s.io/v1alpha2 JobSet" {
		t.Errorf("String() = %q", got)
	}
	if !served.ServedKind(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}) {
		t.Error("a kind that is not optional is always served")
	}
	if !served.ServedObject(&kueue.Workload{}, s) || served.ServedObject(&jobsetapi.JobSet{}, s) {
		t.Error("ServedObject disagrees with Served")
	}
	var all *ServedAPIs
	if !all.Served(APIJobSet) || len(all.NotServed()) != 0 {
		t.Error("a nil ServedAPIs serves everything")
	}

	down := errors.New("connection refused")
	if _, err := DiscoverAPIs(func(schema.GroupVersionKind) (bool, error) { return false, down }, OptionalAPIs); !errors.Is(err, down) {
		t.Errorf("DiscoverAPIs with the API server down = %v, want its error", err)
	}
	calls := 0
	flaky := func(gvk schema.GroupVersionKind) (bool, error) {
		if calls++; calls < 3 {
			return false, down
		}
		return true, nil
	}
	got, err := DiscoverAPIsRetrying(context.Background(), flaky, OptionalAPIs, time.Millisecond, time.Minute)
	if err != nil || len(got.NotServed()) != 0 {
		t.Errorf("DiscoverAPIsRetrying = %s, %v; want all served once the API server answers", got, err)
	}
}

// TestDiscoveryLookup: discovery of the group version says whether the kind is served: a
// group version the server does not know is not served, nor a kind it does not list.
func TestDiscoveryLookup(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	lookup := DiscoveryLookup(d)
	if ok, err := lookup(APIJobSet.GVK); ok || err != nil {
		t.Errorf("JobSet before its CRD = %v, %v; want not served", ok, err)
	}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "jobset.x-k8s.io/v1alpha2", APIResources: []metav1.APIResource{
		{Name: "jobsets/status", Kind: "JobSet"},
	}}}
	if ok, err := lookup(APIJobSet.GVK); ok || err != nil {
		t.Errorf("JobSet with only its status subresource = %v, %v; want not served", ok, err)
	}
	d.Resources[0].APIResources = append(d.Resources[0].APIResources, metav1.APIResource{Name: "jobsets", Kind: "JobSet", Namespaced: true})
	if ok, err := lookup(APIJobSet.GVK); !ok || err != nil {
		t.Errorf("JobSet with its CRD = %v, %v; want served", ok, err)
	}
}

// TestReportServedAPIs: one gauge series per optional API, 1 when served.
func TestReportServedAPIs(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := NewServedAPIs(OptionalAPIs, APIWorkload).Report(logr.Discard(), reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP batchledger_api_served Optional APIs the cluster served when the manager started (1) or not (0); the manager restarts when that changes.
# TYPE batchledger_api_served gauge
batchledger_api_served{api="jobset.x-k8s.io/v1alpha2 JobSet"} 0
batchledger_api_served{api="kueue.x-k8s.io/v1beta2 Workload"} 1
batchledger_api_served{api="trainer.kubeflow.org/v1alpha1 TrainJob"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricAPIServed); err != nil {
		t.Error(err)
	}
}

// TestWatchAPIs: the watch stops the manager (ErrServedAPIsChanged) once discovery
// answers differently from the wiring, asks again when discovery fails, and returns
// nothing when the manager stops first.
func TestWatchAPIs(t *testing.T) {
	wired := NewServedAPIs(OptionalAPIs, APIWorkload, APITrainJob)
	var calls atomic.Int32
	jobSetAfter := func(n int32) Lookup {
		return func(gvk schema.GroupVersionKind) (bool, error) {
			c := calls.Add(1)
			switch {
			case c == 2:
				return false, errors.New("etcdserver: request timed out")
			case gvk == APIJobSet.GVK:
				return c > n, nil
			}
			return true, nil
		}
	}
	w := &WatchAPIs{Lookup: jobSetAfter(5), Wired: wired, Interval: time.Millisecond}
	if !w.NeedLeaderElection() {
		t.Error("the watch must run on the leader only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Start(ctx); !errors.Is(err, ErrServedAPIsChanged) {
		t.Errorf("Start = %v, want ErrServedAPIsChanged", err)
	}

	calls.Store(0)
	quiet := &WatchAPIs{Lookup: jobSetAfter(1 << 30), Wired: wired, Interval: time.Millisecond}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := quiet.Start(ctx); err != nil {
		t.Errorf("Start with nothing changed = %v, want nil when the manager stops", err)
	}
}

// recordingManager records the runnables added to the manager: the controllers.
type recordingManager struct {
	manager.Manager
	added []manager.Runnable
}

func (m *recordingManager) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return m.Manager.Add(r)
}

// controllers are the names of the controllers added, each with the kinds it watches.
func (m *recordingManager) controllers() map[string][]string {
	out := map[string][]string{}
	for _, r := range m.added {
		v := reflect.ValueOf(r)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		name := v.Elem().FieldByName("Name")
		watches := v.Elem().FieldByName("startWatches")
		if !name.IsValid() || !watches.IsValid() {
			continue
		}
		var kinds []string
		for i := range watches.Len() {
			src := watches.Index(i).Elem() // *source.Kind
			if src.Kind() == reflect.Pointer {
				if typ := src.Elem().FieldByName("Type"); typ.IsValid() && !typ.IsNil() {
					kinds = append(kinds, typ.Elem().Elem().Type().Name())
				}
			}
		}
		slices.Sort(kinds)
		out[name.String()] = kinds
	}
	return out
}

// newTestManager is a manager on a cluster no request reaches, mapping kinds with mapper.
func newTestManager(t *testing.T, s *runtime.Scheme, mapper apimeta.RESTMapper, cacheOpts cache.Options) *recordingManager {
	t.Helper()
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 s,
		MapperProvider:         func(*rest.Config, *http.Client) (apimeta.RESTMapper, error) { return mapper, nil },
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheOpts,
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &recordingManager{Manager: mgr}
}

// TestSetupFollowsServedAPIs: with an optional API not served, the manager builds its
// cache and indexes and sets up its controllers without any watch, index or controller
// of that kind (which would never sync, and stop the manager); everything else is set up
// as with every API served.
func TestSetupFollowsServedAPIs(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	accountWatches := []string{"BatchAccount", "Job", "Pod"}
	for _, tc := range []struct {
		name      string
		notServed []OptionalAPI
		want      map[string][]string
	}{
		{name: "everything served", want: map[string][]string{
			AccountControllerName:         append(slices.Clone(accountWatches), "JobSet", "TrainJob", "Workload"),
			WorkloadCleanupControllerName: {"BatchAccount", "Workload"},
			"shortform-job":               {"BatchAccount", "Job"},
			"shortform-jobset":            {"BatchAccount", "JobSet"},
			"shortform-trainjob":          {"BatchAccount", "TrainJob"},
		}},
		{name: "no JobSet", notServed: []OptionalAPI{APIJobSet}, want: map[string][]string{
			AccountControllerName:         append(slices.Clone(accountWatches), "TrainJob", "Workload"),
			WorkloadCleanupControllerName: {"BatchAccount", "Workload"},
			"shortform-job":               {"BatchAccount", "Job"},
			"shortform-trainjob":          {"BatchAccount", "TrainJob"},
		}},
		{name: "no Trainer", notServed: []OptionalAPI{APITrainJob}, want: map[string][]string{
			AccountControllerName:         append(slices.Clone(accountWatches), "JobSet", "Workload"),
			WorkloadCleanupControllerName: {"BatchAccount", "Workload"},
			"shortform-job":               {"BatchAccount", "Job"},
			"shortform-jobset":            {"BatchAccount", "JobSet"},
		}},
		{name: "no JobSet, no Trainer, no Kueue", notServed: []OptionalAPI{APIJobSet, APITrainJob, APIWorkload}, want: map[string][]string{
			AccountControllerName: accountWatches,
			"shortform-job":       {"BatchAccount", "Job"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mapper := fakeMapper(t, s, tc.notServed...)
			served, err := DiscoverAPIs(MapperLookup(mapper), OptionalAPIs)
			if err != nil {
				t.Fatal(err)
			}
			if got := served.NotServed(); !slices.Equal(apiNames(got), apiNames(tc.notServed)) {
				t.Fatalf("not served %v, want %v", got, tc.notServed)
			}
			opts := CacheOptions()
			if len(tc.notServed) > 0 {
				if _, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: s, Mapper: mapper, ByObject: CacheOptions().ByObject}); err == nil {
					t.Error("the untrimmed cache options were accepted for a kind not served; the trim is not needed?")
				}
			}
			served.TrimCache(&opts, s)
			mgr := newTestManager(t, s, mapper, opts)
			ctx := context.Background()
			if err := SetupIndexes(ctx, mgr, served); err != nil {
				t.Fatalf("SetupIndexes: %v", err)
			}
			for _, st := range []interface{ SetupWithManager(ctrl.Manager) error }{
				&Reconciler{Client: mgr.GetClient(), APIs: served},
				&ShortFormReconciler{Client: mgr.GetClient(), Kind: jobkind.Kind{}, APIs: served},
				&ShortFormReconciler{Client: mgr.GetClient(), Kind: jobsetkind.Kind{}, APIs: served},
				&ShortFormReconciler{Client: mgr.GetClient(), Kind: trainjobkind.Kind{}, APIs: served},
			} {
				if err := st.SetupWithManager(mgr); err != nil {
					t.Fatalf("%T: %v", st, err)
				}
			}
			for _, kinds := range tc.want {
				slices.Sort(kinds)
			}
			if got := mgr.controllers(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("controllers and their watches:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// notServedReader fails every read of the kinds not served as the manager's cache does
// (no kind match), so that a test proves the reconciler never asks.
type notServedReader struct {
	client.Client
	apis *ServedAPIs
}

func (r notServedReader) check(obj runtime.Object) error {
	if !r.apis.ServedObject(obj, r.Scheme()) {
		return &apimeta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: reflect.TypeOf(obj).Elem().Name()}}
	}
	return nil
}

func (r notServedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.check(obj); err != nil {
		return err
	}
	return r.Client.Get(ctx, key, obj, opts...)
}

func (r notServedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var err error
	switch list.(type) {
	case *jobsetapi.JobSetList:
		err = r.check(&jobsetapi.JobSet{})
	case *kueue.WorkloadList:
		err = r.check(&kueue.Workload{})
	}
	if err != nil {
		return err
	}
	return r.Client.List(ctx, list, opts...)
}

// TestReconcileAPINotServed: in a cluster without JobSet and Kueue, an account of a
// JobSet child and a plain Job reconciles without reading either kind: the JobSet
// target reports APINotServed (not a wait for the JobSet), the Job is accounted, without
// a Workload.
func TestReconcileAPINotServed(t *testing.T) {
	ba := wrappers.MakeBatchAccount("mixed", "ns").ShardCount("s", 4).
		AssignJobOrdinals("j", "0-1", "0-1").AssignJobSet("train", "workers", 0, "0-1", "2-3").Obj()
	j := wrappers.MakeJob("j", "ns").Indexed(2).UID("uid-j").Completed("0-1", 2).Obj()
	f := newFixture(t, hooks{}, ba, j)
	served := NewServedAPIs(OptionalAPIs)
	r := f.reconciler()
	r.Client, r.APIs = notServedReader{Client: f.c, apis: served}, served
	if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "mixed"}}); retried(res, err) {
		t.Fatalf("reconcile = %+v, %v", res, err)
	}
	st := f.account(t, "mixed").Status
	if st.Shards.Covered != 2 {
		t.Errorf("covered %d, want the Job's 2", st.Shards.Covered)
	}
	adm := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAdmitted)
	if adm == nil || adm.Reason != v1alpha1.ReasonAPINotServed ||
		!strings.Contains(adm.Message, "jobset train workers[0] cannot exist: jobset.x-k8s.io/v1alpha2 JobSet is not served by this cluster") {
		t.Errorf("Admitted = %+v, want APINotServed naming JobSet", adm)
	}
	for _, ts := range st.Targets {
		switch ts.Name {
		case "jobset/train/workers/0":
			if ts.Found || len(ts.Problems) != 1 || !strings.Contains(ts.Problems[0], "is not served") {
				t.Errorf("JobSet target %+v, want not found with the API not served", ts)
			}
		case "job/j":
			if !ts.Found || ts.Workload != nil || len(ts.Problems) > 0 {
				t.Errorf("Job target %+v, want found, no Workload, no problem", ts)
			}
		}
	}
	if evs := f.eventsOf("BatchAccount"); !slices.Contains(evs, "Warning APINotServed") {
		t.Errorf("account events %v, want a Warning APINotServed", evs)
	}
}

// TestReconcileTrainJobWithoutJobSetAPI: Trainer renders a TrainJob's children through a
// JobSet, so a TrainJob target needs JobSet's API as well as Trainer's. In a cluster that
// serves Trainer's CRDs but not JobSet's, the account reconciles without reading a
// JobSet and says the target cannot exist until JobSet's API is served.
func TestReconcileTrainJobWithoutJobSetAPI(t *testing.T) {
	ba := wrappers.MakeBatchAccount("tj", "ns").ShardCount("s", 2).AssignTrainJob("llm", "node", 0, "0-1", "0-1").Obj()
	tj := wrappers.MakeTrainJob("llm", "ns", "torch-distributed").UID("llm-uid").NumNodes(2).Obj()
	f := newFixture(t, hooks{}, ba, tj)
	served := NewServedAPIs(OptionalAPIs, APITrainJob, APIWorkload)
	r := f.reconciler()
	r.Client, r.APIs = notServedReader{Client: f.c, apis: served}, served
	if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "tj"}}); retried(res, err) {
		t.Fatalf("reconcile = %+v, %v", res, err)
	}
	st := f.account(t, "tj").Status
	adm := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAdmitted)
	if adm == nil || adm.Reason != v1alpha1.ReasonAPINotServed || !strings.Contains(adm.Message, "jobset.x-k8s.io/v1alpha2 JobSet is not served by this cluster") {
		t.Errorf("Admitted = %+v, want APINotServed naming JobSet", adm)
	}
}

// TestHeldPodOfAKindNoLongerServedIsRecorded: JobSet's API went away while a results
// account's JobSet child pod was held: the account still records the pod's result (pods
// are cached whatever the kinds served), so the pod goes at once rather than after
// MaxHold.
func TestHeldPodOfAKindNoLongerServedIsRecorded(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").Obj()
	js.UID = "ts-uid"
	child := wrappers.MakeJob("ts-workers-0", "ns").Indexed(1).UID("child-uid").
		JobSetChild(js, "workers", 0, 0).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj()
	pod := wrappers.MakeIndexPod(child, "ts-workers-0-0", 0).Finalizers(v1alpha1.ResultFinalizer).
		Succeeded(testNow.Add(-time.Minute), reportOf(t, "s0")).Obj()
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 1).
		AssignJobSet("ts", "workers", 0, "0", "0").RequireResults("").Revisions("D", "m").Obj()
	f := newFixture(t, hooks{}, acct, child, pod)
	served := NewServedAPIs(OptionalAPIs, APIWorkload)
	r := f.reconciler()
	r.Client, r.APIs = notServedReader{Client: f.c, apis: served}, served
	if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); retried(res, err) {
		t.Fatalf("reconcile = %+v, %v", res, err)
	}
	if st := f.account(t, "acct").Status; st.Results.Recorded != 1 {
		t.Fatalf("recorded %d results, want the held pod's", st.Results.Recorded)
	}
	releaser := &PodReleaser{Client: f.c, Recorder: f, Ledger: &f.ledger, Now: func() time.Time { return testNow }}
	if _, err := releaser.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got.Finalizers, v1alpha1.ResultFinalizer) {
		t.Errorf("the pod is still held: %v", got.Finalizers)
	}
}

// TestDispatchedTrainJobWithoutJobSetAPI: a MultiKueue manager that serves Trainer's
// CRDs but not JobSet's (Trainer's controller and JobSet run on the workers only). A
// TrainJob it dispatches renders its JobSet on the worker, where its children are
// recorded: its targets are read from those records without a JobSet read here, and
// are covered and Accepted; a TrainJob that is not dispatched still cannot exist here.
func TestDispatchedTrainJobWithoutJobSetAPI(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	d := multikueue.Dispatch{Workload: "trainjob-tj", JobSet: "tj", TrainJob: "tj"}
	child := workerChild("tj", 0, 0, "0-1")
	for _, tc := range []struct {
		name         string
		dispatched   bool
		wantAccepted string
	}{
		{name: "dispatched", dispatched: true, wantAccepted: "True Accepted"},
		{name: "not dispatched", wantAccepted: "False APINotServed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := makeTJ().Condition(trainer.TrainJobComplete, testNow).Obj()
			wl := trainJobWorkload(tj)
			if tc.dispatched {
				wl = trainJobDispatchedToWorkerA(tj)
			}
			ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").ShardCount("s", 2).AssignTrainJob("tj", "workers", 0, "0-1", "0-1").Obj()
			f := newFixture(t, hooks{}, ba, tj, wl.Obj())
			served := NewServedAPIs(OptionalAPIs, APITrainJob, APIWorkload)
			r := f.reconciler()
			r.Client, r.APIs = notServedReader{Client: f.c, apis: served}, served
			r.WorkerResults = fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(child, d)}}}
			if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "acct"}}); retried(res, err) {
				t.Fatalf("reconcile = %+v, %v", res, err)
			}
			st := f.account(t, "acct").Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted); got != tc.wantAccepted {
				t.Errorf("Accepted = %q (%s), want %q", got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted).Message, tc.wantAccepted)
			}
		})
	}
}
