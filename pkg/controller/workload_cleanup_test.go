package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// publishedWorkload is the Workload of job (or of the JobSet js when set) as batchledger
// left it: admitted by Kueue, with our two conditions.
func publishedWorkload(name string, owner func(*wrappers.WorkloadWrapper) *wrappers.WorkloadWrapper) *kueue.Workload {
	at := metav1.NewTime(testNow.Add(-time.Minute))
	w := wrappers.MakeWorkload(name, "ns").UID(name+"-uid").Admitted("cq", at.Time).
		Condition(metav1.Condition{Type: v1alpha1.WorkloadConditionShardsCovered, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllShardsCovered, Message: "BatchAccount old: 2/2 shards covered", LastTransitionTime: at}).
		Condition(metav1.Condition{Type: v1alpha1.WorkloadConditionAccepted, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonResultRejected, Message: "BatchAccount old: result of B rejected", LastTransitionTime: at})
	return owner(w).Obj()
}

// TestWorkloadCleanupRemovesConditionsNoAccountSpeaksFor: our conditions leave a Workload
// once no live account names its Job or JobSet (deleted, being deleted, or now naming
// another Job), with an event saying why; Kueue's conditions stay. While an account names
// it, the cleanup writes nothing: that account publishes.
func TestWorkloadCleanupRemovesConditionsNoAccountSpeaksFor(t *testing.T) {
	job := wrappers.MakeJob("j", "ns").UID("j-uid").Obj()
	js := wrappers.MakeJobSet("js", "ns").Obj()
	js.UID = "js-uid"
	ofJob := func(w *wrappers.WorkloadWrapper) *wrappers.WorkloadWrapper { return w.ForJob(job) }
	ofJobSet := func(w *wrappers.WorkloadWrapper) *wrappers.WorkloadWrapper { return w.ForJobSet(js) }
	// moved names Job k now; its status, not rewritten yet, still observed j under job-j:
	// the cleanup runs on the spec change's event, before the account's next status.
	moved := wrappers.MakeBatchAccount("moved", "ns").AssignJob("k", "0-1", "A", "B").Generation(2).
		TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: "j-uid", Workload: &v1alpha1.WorkloadObservation{Name: "job-j", UID: "job-j-uid"}}).
		Condition(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "", testNow.Add(-time.Minute)).Obj()
	moved.Status.ObservedGeneration = 1
	deleting := wrappers.MakeBatchAccount("leaving", "ns").AssignJob("j", "0-1", "A", "B").Obj()
	deleting.Finalizers = []string{"test.example/hold"}
	deleting.DeletionTimestamp = &metav1.Time{Time: testNow}
	kueueOnly := []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted}
	everything := append(slices.Clone(kueueOnly), v1alpha1.WorkloadConditionShardsCovered, v1alpha1.WorkloadConditionAccepted)

	for _, tc := range []struct {
		name       string
		workload   *kueue.Workload
		objs       []client.Object
		wantTypes  []string
		wantEvents []string
	}{{
		name:       "the only account was deleted",
		workload:   publishedWorkload("job-j", ofJob),
		wantTypes:  kueueOnly,
		wantEvents: []string{"Normal " + EventReasonConditionsRemoved},
	}, {
		name:       "the only account names another Job now",
		workload:   publishedWorkload("job-j", ofJob),
		objs:       []client.Object{wrappers.MakeBatchAccount("moved", "ns").AssignJob("k", "0-1", "A", "B").Obj()},
		wantTypes:  kueueOnly,
		wantEvents: []string{"Normal " + EventReasonConditionsRemoved},
	}, {
		name:       "the only account names another Job now, its status not rewritten yet",
		workload:   publishedWorkload("job-j", ofJob),
		objs:       []client.Object{moved},
		wantTypes:  kueueOnly,
		wantEvents: []string{"Normal " + EventReasonConditionsRemoved},
	}, {
		name:       "the only account is being deleted",
		workload:   publishedWorkload("job-j", ofJob),
		objs:       []client.Object{deleting},
		wantTypes:  kueueOnly,
		wantEvents: []string{"Normal " + EventReasonConditionsRemoved},
	}, {
		name:      "an account still names the Job: it publishes, the cleanup writes nothing",
		workload:  publishedWorkload("job-j", ofJob),
		objs:      []client.Object{wrappers.MakeBatchAccount("stays", "ns").AssignJob("j", "0-1", "A", "B").Obj()},
		wantTypes: everything,
	}, {
		name:      "an account names a child of the JobSet",
		workload:  publishedWorkload("jobset-js", ofJobSet),
		objs:      []client.Object{wrappers.MakeBatchAccount("child", "ns").AssignJobSet("js", "workers", 1, "0-1", "0-1").ShardCount("s", 2).Obj()},
		wantTypes: everything,
	}, {
		name:       "no account names the JobSet",
		workload:   publishedWorkload("jobset-js", ofJobSet),
		wantTypes:  kueueOnly,
		wantEvents: []string{"Normal " + EventReasonConditionsRemoved},
	}, {
		name:      "none of our conditions: nothing to remove",
		workload:  wrappers.MakeWorkload("job-j", "ns").ForJob(job).Admitted("cq", testNow).Obj(),
		wantTypes: kueueOnly,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, append(tc.objs, tc.workload)...)
			key := client.ObjectKeyFromObject(tc.workload)
			res, err := workloadCleanup{f.reconciler()}.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
			if retried(res, err) {
				t.Fatalf("Reconcile = %+v, %v", res, err)
			}
			var wl kueue.Workload
			if err := f.c.Get(context.Background(), key, &wl); err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, c := range wl.Status.Conditions {
				types = append(types, c.Type)
			}
			if diff := cmp.Diff(tc.wantTypes, types); diff != "" {
				t.Errorf("Workload conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, f.eventsOf("Workload")); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			wantApplies := 0
			if tc.wantEvents != nil {
				wantApplies = 1
			}
			if got := len(f.writesOf("status-apply")); got != wantApplies {
				t.Errorf("%d status applies, want %d", got, wantApplies)
			}
		})
	}
}

// TestWorkloadCleanupOfAGoneWorkload: a Workload deleted meanwhile is no error.
func TestWorkloadCleanupOfAGoneWorkload(t *testing.T) {
	f := newFixture(t, hooks{})
	res, err := workloadCleanup{f.reconciler()}.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "gone"}})
	if retried(res, err) || len(f.writes) != 0 {
		t.Errorf("Reconcile = %+v, %v; writes %v", res, err, f.writes)
	}
}

// recordingQueue is a workqueue that records what was added (now or later), for event
// handler tests.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []string
	// delays are the delays of every AddAfter, by name.
	delays map[string][]time.Duration
}

func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	if q.delays == nil {
		q.delays = map[string][]time.Duration{}
	}
	q.delays[r.Name] = append(q.delays[r.Name], d)
	q.Add(r)
}
func (q *recordingQueue) Add(r reconcile.Request) {
	if !slices.Contains(q.added, r.Name) {
		q.added = append(q.added, r.Name)
	}
}

// TestAccountChangesWakeWhoPublishesForItsWorkloads: an account deleted, or whose spec
// changed, wakes the other accounts sharing one of its targets (before or after the
// change; they republish the Workload conditions without it or with its new verdict), and
// hands the Workloads of its former targets to the cleanup; accounts of other Jobs are
// left alone.
func TestAccountChangesWakeWhoPublishesForItsWorkloads(t *testing.T) {
	jobJ := wrappers.MakeJob("j", "ns").UID("j-uid").Obj()
	jobK := wrappers.MakeJob("k", "ns").UID("k-uid").Obj()
	gone := wrappers.MakeBatchAccount("gone", "ns").AssignJob("j", "0-1", "A", "B").Obj()
	before := wrappers.MakeBatchAccount("moving", "ns").AssignJob("j", "0-1", "A", "B").Generation(1).Obj()
	after := wrappers.MakeBatchAccount("moving", "ns").AssignJob("k", "0-1", "A", "B").Generation(2).Obj()
	objs := []client.Object{
		jobJ, jobK,
		wrappers.MakeWorkload("job-j", "ns").ForJob(jobJ).Obj(),
		wrappers.MakeWorkload("job-k", "ns").ForJob(jobK).Obj(),
		wrappers.MakeBatchAccount("shares-j", "ns").AssignJob("j", "0-1", "C", "D").Obj(),
		wrappers.MakeBatchAccount("shares-k", "ns").AssignJob("k", "0-1", "C", "D").Obj(),
		wrappers.MakeBatchAccount("elsewhere", "ns").AssignJob("x", "0-1", "C", "D").Obj(),
		after,
	}
	for _, tc := range []struct {
		name          string
		fire          func(ctx context.Context, r *Reconciler, accounts, workloads *recordingQueue)
		wantAccounts  []string
		wantWorkloads []string
	}{{
		name: "deleted",
		fire: func(ctx context.Context, r *Reconciler, accounts, workloads *recordingQueue) {
			r.accountChanges().Delete(ctx, event.DeleteEvent{Object: gone}, accounts)
			r.formerWorkloads().Delete(ctx, event.DeleteEvent{Object: gone}, workloads)
		},
		wantAccounts:  []string{"gone", "shares-j"},
		wantWorkloads: []string{"job-j"},
	}, {
		name: "now names another Job",
		fire: func(ctx context.Context, r *Reconciler, accounts, workloads *recordingQueue) {
			r.accountChanges().Update(ctx, event.UpdateEvent{ObjectOld: before, ObjectNew: after}, accounts)
			r.formerWorkloads().Update(ctx, event.UpdateEvent{ObjectOld: before, ObjectNew: after}, workloads)
		},
		wantAccounts:  []string{"moving", "shares-j", "shares-k"},
		wantWorkloads: []string{"job-j"},
	}, {
		name: "created: itself only",
		fire: func(ctx context.Context, r *Reconciler, accounts, workloads *recordingQueue) {
			r.accountChanges().Create(ctx, event.CreateEvent{Object: after}, accounts)
			r.formerWorkloads().Create(ctx, event.CreateEvent{Object: after}, workloads)
		},
		wantAccounts: []string{"moving"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, objs...)
			accounts, workloads := &recordingQueue{}, &recordingQueue{}
			tc.fire(context.Background(), f.reconciler(), accounts, workloads)
			slices.Sort(accounts.added)
			if diff := cmp.Diff(tc.wantAccounts, accounts.added); diff != "" {
				t.Errorf("accounts woken (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWorkloads, workloads.added); diff != "" {
				t.Errorf("Workloads to clean up (-want +got):\n%s", diff)
			}
			// Looked at again later: a publish sent before the change may land after the
			// first look.
			for _, wl := range tc.wantWorkloads {
				if got, want := workloads.delays[wl], []time.Duration{BatchPeriod, WorkloadCleanupRecheck}; !slices.Equal(got, want) {
					t.Errorf("Workload %s looked at after %v, want %v", wl, got, want)
				}
			}
		})
	}
}

// TestAccountBeingDeletedPublishesNoVerdictOfItsOwn: an account whose deletion began speaks for no
// Workload (the cleanup and the other accounts treat it as gone, LiveAccountsNaming), so
// its own reconciles, which go on while a finalizer keeps it, must not put its verdict
// back on the Workload the cleanup took it off, nor mix it into the verdict the accounts
// that stay publish.
func TestAccountBeingDeletedPublishesNoVerdictOfItsOwn(t *testing.T) {
	j := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).Obj()
	leaving := accountOfJ().Obj()
	leaving.Name, leaving.UID = "leaving", "leaving-uid"
	leaving.Finalizers = []string{"test.example/hold"}
	leaving.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
	wl := publishedWorkload("job-j", func(w *wrappers.WorkloadWrapper) *wrappers.WorkloadWrapper { return w.ForJob(j) })
	f := newFixture(t, hooks{}, j, leaving, wl)
	key := client.ObjectKeyFromObject(wl)
	if res, err := (workloadCleanup{f.reconciler()}).Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); retried(res, err) {
		t.Fatalf("cleanup = %+v, %v", res, err)
	}
	if _, err := f.reconcile(leaving.Name); err != nil {
		t.Fatal(err)
	}
	var got kueue.Workload
	if err := f.c.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if v1alpha1.IsWorkloadCondition(c.Type) {
			t.Errorf("the Workload carries %s=%s (%s) of an account being deleted", c.Type, c.Status, c.Message)
		}
	}
}

// TestAccountBeingDeletedTakesItsVerdictOff: the cleanup runs once, on the event of the
// deletion, and a publish of the account that read it before its deletion may land after
// the cleanup (or the other accounts' republish). The account's own reconciles, which go
// on while a finalizer keeps it, then put the Workload right: its verdict off, the
// verdict of the accounts that stay on, or none when none stays.
func TestAccountBeingDeletedTakesItsVerdictOff(t *testing.T) {
	j := jobJ(v1alpha1.ScopeCoverage).Completed("0", 1).Obj()
	staying := accountOfJ().Obj()
	staying.Name, staying.UID = "staying", "staying-uid"
	for _, tc := range []struct {
		name   string
		others []client.Object
		// want are the batchledger condition types left on the Workload.
		want []string
	}{
		{name: "no account stays: no verdict"},
		{name: "another account stays: its verdict alone", others: []client.Object{staying},
			want: []string{v1alpha1.WorkloadConditionShardsCovered, v1alpha1.WorkloadConditionAccepted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The Workload carries the verdict the account "old" published before its deletion.
			leaving := accountOfJ().Obj()
			leaving.Name, leaving.UID = "old", "old-uid"
			leaving.Finalizers = []string{"test.example/hold"}
			leaving.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
			wl := publishedWorkload("job-j", func(w *wrappers.WorkloadWrapper) *wrappers.WorkloadWrapper { return w.ForJob(j) })
			f := newFixture(t, hooks{}, append([]client.Object{j, leaving, wl}, tc.others...)...)
			if _, err := f.reconcile(leaving.Name); err != nil {
				t.Fatal(err)
			}
			var got kueue.Workload
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &got); err != nil {
				t.Fatal(err)
			}
			var have []string
			for _, c := range got.Status.Conditions {
				if !v1alpha1.IsWorkloadCondition(c.Type) {
					continue
				}
				have = append(have, c.Type)
				if strings.Contains(c.Message, "BatchAccount old") {
					t.Errorf("%s still speaks for the account being deleted: %s", c.Type, c.Message)
				}
			}
			slices.Sort(have)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(have, want) {
				t.Errorf("batchledger conditions %v, want %v", have, want)
			}
		})
	}
}
