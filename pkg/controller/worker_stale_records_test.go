package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestWorkerRecordsOfAnEarlierJobOfTheWorkloadsName: a manager Job names its Workload
// itself (Kueue's prebuilt Workload, kueue.x-k8s.io/prebuilt-workload-name), and the
// batch is run again under the same Job and Workload names (the Job deleted and created
// again, a new identity) on the same worker, within the worker's record retention. The
// records that worker holds of the earlier run name the same Workload and Job, but their
// pods finished before this Job existed: they are not its results, and must not stand
// for its shards once its copy completes their indexes again. Records of pods that
// finished after the Job was created (give or take the clusters' clock skew) are its own.
func TestWorkerRecordsOfAnEarlierJobOfTheWorkloadsName(t *testing.T) {
	msg := func(shard string) string { return reportOf(t, shard) }
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	created := testNow.Add(-2 * time.Hour)
	for _, tc := range []struct {
		name     string
		finished time.Time
		// written is when the worker's API server created the records (unset when zero).
		written      time.Time
		wantAccepted string
		wantResults  int32
	}{
		{name: "its own run's records", finished: testNow.Add(-time.Minute),
			wantAccepted: "True Accepted", wantResults: 2},
		{name: "the earlier run's records: not its results", finished: created.Add(-time.Hour),
			wantAccepted: "False ResultsPending"},
		{name: "finished just before its creation by the manager's clock: within the clock skew allowance",
			finished: created.Add(-30 * time.Second), wantAccepted: "True Accepted", wantResults: 2},
		{name: "the earlier run's records, written before its creation", finished: created.Add(-time.Hour),
			written: created.Add(-time.Hour), wantAccepted: "False ResultsPending"},
		{name: "finished by a node's clock far behind, written after its creation: its own",
			finished: created.Add(-time.Hour), written: testNow.Add(-time.Minute), wantAccepted: "True Accepted", wantResults: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := []v1alpha1.WorkerResult{workerRecordAt("job-j", 0, msg("A"), tc.finished), workerRecordAt("job-j", 1, msg("B"), tc.finished)}
			for i := range recs {
				recs[i].CreationTimestamp = metav1.NewTime(tc.written)
			}
			job := jobJ(v1alpha1.ScopeResults).ManagedBy(multikueue.ManagedBy).Created(created).
				Completed("0-1", 2).Complete(testNow).Obj()
			wl := workloadOfJ(job).DispatchedTo("worker-a").Obj()
			f := newFixture(t, hooks{}, accountOfJ().Revisions("D", "m").RequireResults("").Obj(), job, wl)
			st := f.reconcileWorkers(t, f.reconciler(), fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				records: map[string][]v1alpha1.WorkerResult{"worker-a": recs}}).Status
			wantAccepted(t, st, tc.wantAccepted)
			if st.Results.Recorded != tc.wantResults {
				t.Errorf("recorded %d results, want %d", st.Results.Recorded, tc.wantResults)
			}
		})
	}
}

// TestWorkerJobsOfAnEarlierJobSetOfTheWorkloadsName: as
// TestWorkerRecordsOfAnEarlierJobOfTheWorkloadsName, for a dispatched JobSet run again
// under its name and its prebuilt Workload's: the WorkerJobs the worker keeps of the
// earlier JobSet's children name the same Workload, JobSet and child Jobs, but those
// Jobs were created before this JobSet existed. They are not its children, and must not
// cover its targets before its own children are recorded.
func TestWorkerJobsOfAnEarlierJobSetOfTheWorkloadsName(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	d := multikueue.Dispatch{Workload: "jobset-js", JobSet: "js"}
	created := testNow.Add(-2 * time.Hour)
	for _, tc := range []struct {
		name         string
		childCreated time.Time
		wantFound    bool
		wantCovered  int32
	}{
		{name: "its own child", childCreated: testNow.Add(-time.Hour), wantFound: true, wantCovered: 2},
		{name: "the earlier JobSet's child: not its own", childCreated: created.Add(-time.Hour)},
		{name: "created just before it by the manager's clock: within the clock skew allowance",
			childCreated: created.Add(-30 * time.Second), wantFound: true, wantCovered: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := wrappers.MakeJobSet("js", "ns")
			js.CreationTimestamp = metav1.NewTime(created)
			fx := newDispatchedJobSet(t, js, testNow.Add(-time.Hour))
			child := workerChild("js", 0, 0, "0-1")
			child.CreationTimestamp = metav1.NewTime(tc.childCreated)
			st := fx.reconcile(t, fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok},
				jobs: map[string][]v1alpha1.WorkerJob{"worker-a": {*multikueue.NewJobRecord(child, d)}}}).Status
			if len(st.Targets) == 0 || st.Targets[0].Found != tc.wantFound || st.Shards.Covered != tc.wantCovered {
				t.Errorf("targets %+v covering %d shards; want the first found %v, covering %d", st.Targets, st.Shards.Covered, tc.wantFound, tc.wantCovered)
			}
		})
	}
}

// evictedWorkerRecord is a worker's record of pod uid of job-j, which finished at
// finished reporting shard's result at index idx.
func evictedWorkerRecord(t *testing.T, uid string, idx int, shard string, finished time.Time) v1alpha1.WorkerResult {
	t.Helper()
	r := workerRecordAt("job-j", idx, reportOf(t, shard), finished)
	r.Name, r.PodUID = uid, types.UID(uid)
	return r
}

// movedFromWorkerA is a dispatched Job j, Complete, whose pods' termination grace period
// is grace (as the manager's cache holds it), its Workload now on worker-b, and the
// account's admissions of it: on worker-a, evicted at evicted, then on worker-b.
func movedFromWorkerA(t *testing.T, grace *int64, evicted time.Time) (*batchv1.Job, *kueue.Workload, []v1alpha1.Admission) {
	t.Helper()
	job := jobJ(v1alpha1.ScopeResults).ManagedBy(multikueue.ManagedBy).Completed("0-1", 2).Complete(testNow).Obj()
	job.Spec.Template.Spec.TerminationGracePeriodSeconds = grace
	// As the manager's cache holds it: the reconciler reads the Job from there.
	cached, err := jobTransform(job)
	if err != nil {
		t.Fatal(err)
	}
	job = cached.(*batchv1.Job)
	return job, workloadOfJ(job).DispatchedTo("worker-b").Obj(), []v1alpha1.Admission{
		{Workload: "job-j", ClusterQueue: "gpu", Cluster: "worker-a", AdmittedAt: metav1.NewTime(evicted.Add(-time.Hour)),
			EvictedAt: &metav1.Time{Time: evicted}, EvictionReason: "Preempted"},
		{Workload: "job-j", ClusterQueue: "gpu", Cluster: "worker-b", AdmittedAt: metav1.NewTime(testNow.Add(-time.Hour))}}
}

// TestLateRecordsOfAnEvictedWorkerDoNotStandForTheNextOne: a dispatched Job runs on
// worker-a, is evicted there, and MultiKueue dispatches its Workload to worker-b, where
// its new copy runs every index again (the manager's Job's status is worker-b's copy's).
// What worker-a recorded of its admission counts (its pods ran this identity's indexes),
// but a pod of worker-a that finished after that admission ended (a pod ending late in
// its termination, or a Job of the copy's name and marks a worker-a namespace user made
// once Kueue deleted the copy) is not a result of it: it must not stand for the index
// worker-b's copy completed, where worker-b's own result does. A minute of clock skew is
// allowed, and the pods' termination grace period, but only to pods of a worker Job
// (the worker's jobUID) of which a pod finished during the admission: that namespace
// user's Job, made once the copy was gone, has none.
func TestLateRecordsOfAnEvictedWorkerDoNotStandForTheNextOne(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	evicted := testNow.Add(-2 * time.Hour)
	rec := func(uid string, idx int, shard string, finished time.Time) v1alpha1.WorkerResult {
		return evictedWorkerRecord(t, uid, idx, shard, finished)
	}
	aBefore := rec("a-0", 0, "A", evicted.Add(-time.Minute))
	aLate := rec("a-1", 1, "B", evicted.Add(10*time.Minute))
	aSkewed := rec("a-1", 1, "B", evicted.Add(30*time.Second))
	b0, b1 := rec("b-0", 0, "A", testNow.Add(-time.Minute)), rec("b-1", 1, "B", testNow.Add(-time.Minute))
	// forged is r recorded of a pod of another Job than worker-a's copy: one of the
	// copy's name and marks a namespace user made there once Kueue deleted the copy.
	forged := func(r v1alpha1.WorkerResult) v1alpha1.WorkerResult {
		r.JobUID = "forged-j-uid"
		return r
	}
	for _, tc := range []struct {
		name    string
		a, b    []v1alpha1.WorkerResult
		dropped int32  // admissions left out of the status
		grace   *int64 // the Job's pods' termination grace period, s
		// unseen: the account has not seen the eviction from worker-a nor the admission
		// on worker-b (the controller was down meanwhile); the Workload was admitted there
		// an hour before testNow.
		unseen     bool
		wantAccept string
		// want are the recorded results' pods by index, in recording order.
		want []string
	}{
		{name: "worker-a's records of its admission count", a: []v1alpha1.WorkerResult{aBefore}, b: []v1alpha1.WorkerResult{b1},
			wantAccept: "True Accepted", want: []string{"a-0", "b-1"}},
		{name: "worker-a's late record does not stand for worker-b's run", a: []v1alpha1.WorkerResult{aBefore, aLate},
			wantAccept: "False ResultsPending", want: []string{"a-0"}},
		{name: "worker-a's late record beside worker-b's: worker-b's stands", a: []v1alpha1.WorkerResult{aBefore, aLate},
			b: []v1alpha1.WorkerResult{b0, b1}, wantAccept: "True Accepted", want: []string{"a-0", "b-0", "b-1"}},
		{name: "late by less than the clock skew allowance: counts", a: []v1alpha1.WorkerResult{aBefore, aSkewed},
			wantAccept: "True Accepted", want: []string{"a-0", "a-1"}},
		{name: "late within its pods' termination grace period: counts", grace: ptr.To[int64](900),
			a: []v1alpha1.WorkerResult{aBefore, aLate}, wantAccept: "True Accepted", want: []string{"a-0", "a-1"}},
		{name: "late past its pods' termination grace period: does not stand", grace: ptr.To[int64](300),
			a: []v1alpha1.WorkerResult{aBefore, aLate}, wantAccept: "False ResultsPending", want: []string{"a-0"}},
		{name: "another Job's pod, finished within the clock skew allowance after the end: does not stand",
			a: []v1alpha1.WorkerResult{aBefore, forged(aSkewed)}, wantAccept: "False ResultsPending", want: []string{"a-0"}},
		{name: "another Job's pod, finished within the termination grace period after the end: does not stand", grace: ptr.To[int64](900),
			a: []v1alpha1.WorkerResult{aBefore, forged(aLate)}, wantAccept: "False ResultsPending", want: []string{"a-0"}},
		{name: "another Job's pod beside worker-b's: worker-b's stands", a: []v1alpha1.WorkerResult{aBefore, forged(aSkewed)},
			b: []v1alpha1.WorkerResult{b0, b1}, wantAccept: "True Accepted", want: []string{"a-0", "b-0", "b-1"}},
		{name: "no pod of the copy finished before the end: its index runs again on worker-b", a: []v1alpha1.WorkerResult{aSkewed},
			b: []v1alpha1.WorkerResult{b0, b1}, wantAccept: "True Accepted", want: []string{"b-0", "b-1"}},
		{name: "admissions left out of the status: worker-a's end unknown, its records count", dropped: 1,
			a: []v1alpha1.WorkerResult{aBefore, aLate}, wantAccept: "True Accepted", want: []string{"a-0", "a-1"}},
		{name: "the move unseen: worker-a's record of before worker-b's admission counts", unseen: true,
			a: []v1alpha1.WorkerResult{aBefore, rec("a-1", 1, "B", testNow.Add(-90*time.Minute))}, wantAccept: "True Accepted", want: []string{"a-0", "a-1"}},
		{name: "the move unseen: worker-a's record of after worker-b's admission does not stand", unseen: true,
			a: []v1alpha1.WorkerResult{aBefore, rec("a-1", 1, "B", testNow.Add(-30*time.Minute))}, wantAccept: "False ResultsPending", want: []string{"a-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, wl, admissions := movedFromWorkerA(t, tc.grace, evicted)
			if tc.unseen {
				admissions = admissions[:1]
				admissions[0].EvictedAt, admissions[0].EvictionReason = nil, ""
			}
			acct := accountOfJ().Revisions("D", "m").RequireResults("").TargetStatus(v1alpha1.TargetStatus{
				Name: "job/j", Job: "j", UID: job.UID, Found: true, AdmissionsDropped: tc.dropped, Admissions: admissions})
			f := newFixture(t, hooks{}, acct.Obj(), job, wl)
			st := f.reconcileWorkers(t, f.reconciler(), fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok, "worker-b": ok},
				records: map[string][]v1alpha1.WorkerResult{"worker-a": tc.a, "worker-b": tc.b}}).Status
			wantAccepted(t, st, tc.wantAccept)
			if pods := recordedPods(t, f.c); !slices.Equal(pods, tc.want) {
				t.Errorf("recorded the results of %v, want %v", pods, tc.want)
			}
		})
	}
}

// TestLateRecordOfADeletedJobWithinItsGrace: as
// TestLateRecordsOfAnEvictedWorkerDoNotStandForTheNextOne, the dispatched Job was evicted
// from worker-a and moved to worker-b, but worker-a's pod of index 1, still in its
// termination when the admission ended, finished within its template's termination
// grace period, and worker-a's capture of it lagged until the manager's Job (and its
// Workload) were deleted. The grace period the status recorded of the identity while its
// Job existed still bounds how late worker-a's record may be: the Job is not there to
// read it from, and Kubernetes' default of 30 s would drop the result. A status written
// before the grace period was recorded reads as Kubernetes' default.
func TestLateRecordOfADeletedJobWithinItsGrace(t *testing.T) {
	ok := multikueue.WorkerState{Configured: true, Synced: true}
	evicted := testNow.Add(-2 * time.Hour)
	rec := func(uid string, idx int, shard string, finished time.Time) v1alpha1.WorkerResult {
		return evictedWorkerRecord(t, uid, idx, shard, finished)
	}
	aBefore := rec("a-0", 0, "A", evicted.Add(-time.Minute))
	for _, tc := range []struct {
		name  string
		grace *int64 // the Job's pods' termination grace period, s
		// late is how long after the eviction worker-a's pod of index 1 finished.
		late time.Duration
		// unrecorded clears the grace period from the status before the Job's deletion
		// (as a status an earlier version wrote).
		unrecorded   bool
		wantRecorded *int64 // the grace period the status holds of the identity
		wantAccepted bool
		want         []string // the recorded results' pods, in recording order
	}{
		{name: "within a grace period of 300 s: counts", grace: ptr.To[int64](300), late: 100 * time.Second,
			wantRecorded: ptr.To[int64](300), wantAccepted: true, want: []string{"a-0", "a-1"}},
		{name: "past a grace period of 300 s: does not stand", grace: ptr.To[int64](300), late: 10 * time.Minute,
			wantRecorded: ptr.To[int64](300), want: []string{"a-0"}},
		{name: "Kubernetes' default grace period: not recorded, 100 s late does not stand", grace: ptr.To[int64](30),
			late: 100 * time.Second, want: []string{"a-0"}},
		{name: "no grace period in the template: 100 s late does not stand", late: 100 * time.Second, want: []string{"a-0"}},
		{name: "a status without the grace period reads as Kubernetes' default", grace: ptr.To[int64](300), late: 100 * time.Second,
			unrecorded: true, wantRecorded: ptr.To[int64](300), want: []string{"a-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, wl, admissions := movedFromWorkerA(t, tc.grace, evicted)
			acct := accountOfJ().Revisions("D", "m").RequireResults("").TargetStatus(v1alpha1.TargetStatus{
				Name: "job/j", Job: "j", UID: job.UID, Found: true, Admissions: admissions})
			f := newFixture(t, hooks{}, acct.Obj(), job, wl)
			r := f.reconciler()
			workers := fakeWorkers{states: map[string]multikueue.WorkerState{"worker-a": ok, "worker-b": ok},
				records: map[string][]v1alpha1.WorkerResult{"worker-a": {aBefore}}}
			ba := f.reconcileWorkers(t, r, workers)
			if got := ba.Status.Targets[0].TerminationGracePeriodSeconds; !equality.Semantic.DeepEqual(got, tc.wantRecorded) {
				t.Errorf("the status records a grace period of %v s, want %v", ptr.Deref(got, -1), ptr.Deref(tc.wantRecorded, -1))
			}
			if tc.unrecorded {
				ba.Status.Targets[0].TerminationGracePeriodSeconds = nil
				if err := f.c.Status().Update(context.Background(), ba); err != nil {
					t.Fatal(err)
				}
			}
			for _, o := range []client.Object{job, wl} {
				if err := f.c.Delete(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			workers.records = map[string][]v1alpha1.WorkerResult{"worker-a": {aBefore, rec("a-1", 1, "B", evicted.Add(tc.late))}}
			st := f.reconcileWorkers(t, r, workers).Status
			if got := conditionOf(st.Conditions, v1alpha1.ConditionAccepted) == "True Accepted"; got != tc.wantAccepted {
				t.Errorf("Accepted = %v (%s), want %v", got, apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionResultsAccepted).Message, tc.wantAccepted)
			}
			if pods := recordedPods(t, f.c); !slices.Equal(pods, tc.want) {
				t.Errorf("recorded the results of %v, want %v", pods, tc.want)
			}
		})
	}
}
