package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/interceptors"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

const (
	record     = v1alpha1.RecordFinalizer
	foreground = metav1.FinalizerDeleteDependents
)

// recordingAccount is account acct naming Job j, whose status holds entry.
func recordingAccount(entry v1alpha1.TargetStatus) *v1alpha1.BatchAccount {
	entry.Name = "job/j"
	return accountOfJ().TargetStatus(entry).Obj()
}

// jobAt is Job j (uid j-uid, 2 indexes) with finalizers fin.
func jobAt(fin ...string) *wrappers.JobWrapper {
	return wrappers.MakeJob("j", "ns").Indexed(2).UID("j-uid").Finalizers(fin...)
}

// TestJobRecorderReleases: the record finalizer is removed, and only it, once every live
// account naming the Job records its end (its terminal condition, or for a Job deleted
// before it terminated what it completed), when no live account names it in a way it
// observes (a JobSet child whose API is not served, or of an earlier JobSet), and at the
// latest MaxHold after its deletion started, with a Warning; until then the Job is held,
// requeued for the rest of MaxHold while it is being deleted, or read again soon while
// the Job controller still tracks a pod of a Job deleted before it terminated (it may
// still count it; once it took the finalizer off, never).
func TestJobRecorderReleases(t *testing.T) {
	const maxHold = time.Hour
	deletedAgo := func(d time.Duration) time.Time { return testNow.Add(-d) }
	complete := func() *wrappers.JobWrapper {
		return jobAt(foreground, record).Completed("0,1", 2).Complete(testNow.Add(-2 * time.Hour))
	}
	recordedComplete := recordingAccount(v1alpha1.TargetStatus{Job: "j", UID: "j-uid", Found: true, CompletedIndexes: "0,1", Terminal: "Complete"})
	recordedRunning := recordingAccount(v1alpha1.TargetStatus{Job: "j", UID: "j-uid", Found: true, CompletedIndexes: "0"})
	other := wrappers.MakeBatchAccount("other", "ns").UID("other-uid").Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()
	deletedAccount := accountOfJ().Obj()
	deletedAccount.Finalizers = []string{"example.com/keep"}
	// Accounts enough, with names long enough, that their list alone is over an event
	// note's bound.
	var manyPending []client.Object
	for i := range 30 {
		name := fmt.Sprintf("%s-%d", strings.Repeat("a", 55), i)
		manyPending = append(manyPending, wrappers.MakeBatchAccount(name, "ns").UID(name).Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj())
	}
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	js.UID = "ts-uid"
	earlierJS := js.DeepCopy()
	earlierJS.UID = "earlier-ts-uid"
	childOf := func(owner *jobset.JobSet) *batchv1.Job {
		return wrappers.MakeJob("ts-workers-0", "ns").Indexed(2).UID("child-uid").JobSetChild(owner, "workers", 0, 0).
			Completed("0-1", 2).Finalizers(record).Deleting(deletedAgo(time.Minute)).Obj()
	}
	childAccount := wrappers.MakeBatchAccount("acct", "ns").ShardCount("s", 2).AssignJobSet("ts", "workers", 0, "0-1", "0-1").Obj()
	endedJS := js.DeepCopy()
	endedJS.Status.Conditions = []metav1.Condition{{Type: string(jobset.JobSetFailed), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour))}}
	madeAfterTheEnd := childOf(endedJS)
	madeAfterTheEnd.CreationTimestamp = metav1.NewTime(testNow.Add(-30 * time.Minute))
	// Made 30 s after the end, within the clock skew allowance: of the restart attempt of
	// the child the account followed (and recorded), which the reconciler never follows
	// (jobset.MayBeFollowed).
	madeAboutTheEnd := childOf(endedJS)
	madeAboutTheEnd.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Hour + 30*time.Second))
	followedTheChild := wrappers.MakeBatchAccount("acct", "ns").ShardCount("s", 2).AssignJobSet("ts", "workers", 0, "0-1", "0-1").
		TargetStatus(v1alpha1.TargetStatus{Name: "jobset/ts/workers/0", Job: "ts-workers-0", UID: "real-child-uid", Found: true,
			CompletedIndexes: "0", Terminal: "Failed", Deleted: true}).Obj()
	followedBefore := wrappers.MakeBatchAccount("acct", "ns").ShardCount("s", 2).AssignJobSet("ts", "workers", 0, "0-1", "0-1").
		TargetStatus(v1alpha1.TargetStatus{Name: "jobset/ts/workers/0", Job: "ts-workers-0", UID: "child-uid", Found: true, CompletedIndexes: "0"}).Obj()
	deletedAccount.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-time.Minute)}
	// JobSet ts applied again after the child of its earlier object was created.
	olderChild := childOf(earlierJS)
	olderChild.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
	newerJS := js.DeepCopy()
	newerJS.CreationTimestamp = metav1.NewTime(testNow.Add(-10 * time.Minute))
	// An account Accepted on Job j's earlier identity (deleted since): it follows no other.
	acceptedBefore := accountOfJ().TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: "earlier-j-uid", Deleted: true, CompletedIndexes: "0,1", Terminal: "Complete"}).
		Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", testNow.Add(-time.Hour)).Obj()
	acceptedOfAnotherSpec := acceptedBefore.DeepCopy()
	acceptedOfAnotherSpec.Generation = 2
	cases := []struct {
		name string
		job  *batchv1.Job
		objs []client.Object
		// coveragePods are in the cache of the coverage scope's succeeded pods.
		coveragePods []client.Object
		// latePods are the Job's succeeded pods that neither cache holds (LatePods: its
		// template carries no scope label).
		latePods []client.Object
		// apiPods, when set, are the Job's pods as the API server holds them (APIReader:
		// the Job controller's tracking finalizers are read there).
		apiPods []client.Object
		// listRefused makes the API server refuse the pods' list (a role without it).
		listRefused bool
		h           hooks
		apis        *ServedAPIs

		wantErr          bool
		wantFinalizers   []string // nil: the Job is gone
		wantRequeueAfter time.Duration
		wantPatches      int
		wantEvents       []string
		wantReleased     float64
		wantExpired      float64
	}{
		{
			name:           "not held: untouched",
			job:            jobAt(foreground).Deleting(deletedAgo(time.Minute)).Obj(),
			objs:           []client.Object{accountOfJ().Obj()},
			wantFinalizers: []string{foreground},
		},
		{
			name:           "running, named: held, not requeued",
			job:            jobAt(record).Obj(),
			objs:           []client.Object{recordedRunning},
			wantFinalizers: []string{record},
		},
		{
			name:           "a Job re-run under the name of an Accepted account's target: it follows none but its record, released",
			job:            complete().Obj(),
			objs:           []client.Object{acceptedBefore},
			wantFinalizers: []string{foreground}, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "the same, being deleted: released at once",
			job:            complete().Deleting(deletedAgo(time.Minute)).Obj(),
			objs:           []client.Object{acceptedBefore},
			wantFinalizers: []string{foreground}, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "the account's spec changed since its verdict: it follows the Job again, held",
			job:            complete().Obj(),
			objs:           []client.Object{acceptedOfAnotherSpec},
			wantFinalizers: []string{foreground, record},
		},
		{
			name:           "complete, recorded Complete: released before any deletion, others' finalizers kept",
			job:            complete().Obj(),
			objs:           []client.Object{recordedComplete},
			wantFinalizers: []string{foreground}, wantPatches: 1, wantReleased: 1,
		},
		{
			// The API server lets a finished Indexed Job's completions change with its
			// parallelism; the Job controller ignores it, and the account keeps the size
			// the Job ended at (account.atTerminalSize).
			name: "complete and scaled down since, recorded Complete at the size it ended at: released",
			job:  complete().Completions(1).Parallelism(1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordingAccount(v1alpha1.TargetStatus{Job: "j", UID: "j-uid", Found: true, Completions: 2,
				CompletedIndexes: "0,1", Terminal: "Complete"})},
			wantFinalizers: []string{foreground}, wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "complete and being deleted, recorded only running: held for the rest of MaxHold",
			job:              complete().Deleting(deletedAgo(10 * time.Minute)).Obj(),
			objs:             []client.Object{recordedRunning},
			wantFinalizers:   []string{foreground, record},
			wantRequeueAfter: 50 * time.Minute,
		},
		{
			name:             "complete, one account of two recorded it: held",
			job:              complete().Deleting(deletedAgo(time.Minute)).Obj(),
			objs:             []client.Object{recordedComplete, other},
			wantFinalizers:   []string{foreground, record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name: "deleted before it terminated, its completed indexes recorded: released",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning},
			// Its last finalizer gone, the Job is.
			wantPatches: 1, wantReleased: 1,
		},
		{
			// An indexed Job's success goes straight into completedIndexes, never through
			// uncountedTerminatedPods: the pod's tracking finalizer says it is not counted yet.
			name: "deleted before it terminated, an index pod succeeded the Job controller has not counted: held",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning,
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			// The coverage scope's succeeded pods are in a cache of their own.
			name: "coverage scope, deleted before it terminated, an index pod succeeded the Job controller has not counted: held",
			job:  jobAt(record).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning},
			coveragePods: []client.Object{
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			// Kueue preempted it as a pod of it was deleted, which exited 0 since; an
			// account requiring results then raised its template (stampScope): the pod keeps
			// the coverage scope of its creation, so only that scope's cache holds it.
			name: "raised to the results scope, deleted before it terminated, an earlier coverage pod succeeded uncounted: held",
			job:  jobAt(record).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning},
			coveragePods: []client.Object{
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
					Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			// Deleted with propagationPolicy Orphan: the garbage collector takes the pod's
			// owner reference off. A Job being deleted adopts no pod, so the Job controller
			// never counts it; it removes the orphan's tracking finalizer uncounted, which
			// changes nothing on the Job that would wake the recorder again.
			name: "deleted orphaning its pods before it terminated, an index pod succeeded uncounted: released",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning,
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).NoOwner().Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name: "coverage scope, deleted orphaning its pods before it terminated, an index pod succeeded uncounted: released",
			job:  jobAt(record).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning},
			coveragePods: []client.Object{
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).NoOwner().Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantPatches: 1, wantReleased: 1,
		},
		{
			// It started before its account named it: its pods carry no scope label, so
			// only its own cache of succeeded pods (LatePods) holds them.
			name:             "started before its account, deleted before it terminated, an index pod succeeded uncounted: held",
			job:              jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs:             []client.Object{recordedRunning},
			latePods:         []client.Object{wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:        "started before its account, deleted before it terminated, its succeeded index pod counted: released",
			job:         jobAt(record).Completed("0,1", 2).Deleting(deletedAgo(time.Minute)).Obj(),
			objs:        []client.Object{recordingAccount(v1alpha1.TargetStatus{Job: "j", UID: "j-uid", Found: true, CompletedIndexes: "0,1"})},
			latePods:    []client.Object{wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name: "deleted before it terminated, its succeeded index pod counted: released",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning,
				wrappers.MakeIndexPod(jobAt().Obj(), "j-0", 0).Succeeded(testNow.Add(-30*time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj(),
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Succeeded(testNow.Add(-30*time.Second), "").Obj()},
			wantPatches: 1, wantReleased: 1,
		},
		{
			// The pod succeeded a moment ago; the cache still shows it running. The Job
			// controller counts it in the sync that takes the tracking finalizers off.
			name: "deleted before it terminated, an index pod succeeded that the cache shows running: held, read again soon",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning,
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Phase(corev1.PodRunning).Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			apiPods: []client.Object{
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Succeeded(testNow.Add(-time.Second), "").Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 15 * time.Second,
		},
		{
			// No cache holds a coverage pod that has not succeeded: the pod may succeed
			// before the Job controller's next sync, which would count it.
			name: "coverage scope, deleted before it terminated, a running pod the Job controller still tracks: held, read again soon",
			job:  jobAt(record).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning},
			apiPods: []client.Object{
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Phase(corev1.PodRunning).Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 15 * time.Second,
		},
		{
			// Background deletion: the pod runs on until the Job is gone, but the Job
			// controller took its tracking finalizer off and will never count it.
			name: "deleted before it terminated, its running pod no longer tracked: released",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning},
			apiPods: []client.Object{
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).Phase(corev1.PodRunning).Obj()},
			wantPatches: 1, wantReleased: 1,
		},
		{
			// Not known: held as if tracked, within MaxHold, rather than failing before it.
			name: "deleted before it terminated, the pods' list refused: held, read again soon",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning}, listRefused: true,
			wantFinalizers:   []string{record},
			wantRequeueAfter: 15 * time.Second,
		},
		{
			name: "deleted before it terminated, the pods' list refused past MaxHold: released with a Warning",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(maxHold + time.Second)).Obj(),
			objs: []client.Object{recordedRunning}, listRefused: true,
			wantPatches: 1, wantReleased: 1, wantExpired: 1,
			wantEvents: []string{"Warning RecordNotWritten"},
		},
		{
			name: "deleted orphaning its pods before it terminated, an orphan still tracked: released",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{recordedRunning},
			apiPods: []client.Object{
				wrappers.MakeIndexPod(jobAt().Obj(), "j-1", 1).NoOwner().Phase(corev1.PodRunning).Finalizers(batchv1.JobTrackingFinalizer).Obj()},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "deleted before it terminated, a success still uncounted: held",
			job:              uncounted(jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj()),
			objs:             []client.Object{recordedRunning},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:             "deleted before it terminated, more completed than recorded: held",
			job:              jobAt(record).Completed("0,1", 2).Deleting(deletedAgo(time.Minute)).Obj(),
			objs:             []client.Object{recordedRunning},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name: "recorded in history (a JobSet restart superseded it): released",
			job:  jobAt(record).Completed("0", 1).Deleting(deletedAgo(time.Minute)).Obj(),
			objs: []client.Object{func() *v1alpha1.BatchAccount {
				ba := accountOfJ().Obj()
				ba.Status.History = []v1alpha1.SupersededIdentity{{Target: "job/j", Job: "j", UID: "j-uid", CompletedIndexes: "0"}}
				return ba
			}()},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "another identity of the same name recorded: held",
			job:              complete().Deleting(deletedAgo(time.Minute)).Obj(),
			objs:             []client.Object{recordingAccount(v1alpha1.TargetStatus{Job: "j", UID: "old-uid", CompletedIndexes: "0,1", Terminal: "Complete"})},
			wantFinalizers:   []string{foreground, record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:           "no account names it: released",
			job:            jobAt(record).Obj(),
			wantFinalizers: []string{}, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "its account is being deleted: released",
			job:            jobAt(record).Obj(),
			objs:           []client.Object{deletedAccount},
			wantFinalizers: []string{}, wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "named only from another namespace's target: released",
			job:            jobAt(record).Obj(),
			objs:           []client.Object{accountOfJ().TargetNamespace("other").Obj()},
			wantFinalizers: []string{}, wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "a JobSet child being deleted, its end not recorded: held",
			job:              childOf(js),
			objs:             []client.Object{js, childAccount},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			name:        "a JobSet child whose kind's API is not served (the account never observes it): released",
			job:         childOf(js),
			objs:        []client.Object{childAccount},
			apis:        NewServedAPIs(OptionalAPIs, APIWorkload),
			wantPatches: 1, wantReleased: 1,
		},
		{
			name:        "a child of an earlier JobSet of the name (the account never follows it): released",
			job:         childOf(earlierJS),
			objs:        []client.Object{js, childAccount},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name:        "a Job of a child's name created after its JobSet ended (no target follows it): released",
			job:         madeAfterTheEnd,
			objs:        []client.Object{endedJS, childAccount},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name:        "a Job of a child's name made about its JobSet's end, another child of its attempt followed (no target follows it): released",
			job:         madeAboutTheEnd,
			objs:        []client.Object{endedJS, followedTheChild},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name:             "a child the account followed, its JobSet since replaced: held until its end is recorded",
			job:              childOf(js),
			objs:             []client.Object{earlierJS, followedBefore},
			wantFinalizers:   []string{record},
			wantRequeueAfter: 59 * time.Minute,
		},
		{
			// Deleted with background propagation and applied again at once (kubectl replace
			// --force): the garbage collector deletes the old JobSet's running child, whose pods
			// still complete indexes, while the account follows only the new JobSet's children.
			// Held, it would keep the new JobSet from creating the child of that name for
			// MaxHold, for a record no account writes.
			name:        "a child the account followed, its JobSet deleted and created again since: released",
			job:         olderChild,
			objs:        []client.Object{newerJS, followedBefore},
			wantPatches: 1, wantReleased: 1,
		},
		{
			name:           "held past MaxHold after its deletion, never recorded: released with a Warning",
			job:            complete().Deleting(deletedAgo(maxHold + time.Second)).Obj(),
			objs:           []client.Object{recordedRunning},
			wantFinalizers: []string{foreground}, wantPatches: 1, wantReleased: 1, wantExpired: 1,
			wantEvents: []string{"Warning RecordNotWritten"},
		},
		{
			name:           "held past MaxHold after its deletion, never recorded by many accounts: released with a Warning",
			job:            complete().Deleting(deletedAgo(maxHold + time.Second)).Obj(),
			objs:           manyPending,
			wantFinalizers: []string{foreground}, wantPatches: 1, wantReleased: 1, wantExpired: 1,
			wantEvents: []string{"Warning RecordNotWritten"},
		},
		{
			name: "the patch's test fails (the finalizers changed): retried",
			job:  complete().Obj(),
			objs: []client.Object{recordedComplete},
			h: hooks{patch: func(client.Object) error {
				return apierrors.NewInvalid(batchv1.SchemeGroupVersion.WithKind("Job").GroupKind(), "j", nil)
			}},
			wantErr:        true,
			wantFinalizers: []string{foreground, record}, wantPatches: 1,
		},
		{
			name:           "listing accounts fails: retried, held",
			job:            complete().Obj(),
			objs:           []client.Object{recordedComplete},
			h:              hooks{list: func(client.ObjectList) error { return errors.New("etcd is sad") }},
			wantErr:        true,
			wantFinalizers: []string{foreground, record},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.h, append([]client.Object{tc.job}, tc.objs...)...)
			m := newJobRecordMetrics(prometheus.NewRegistry())
			// The recorder started before every deletion here (TestJobRecordHoldOutlastsAnOutage
			// is the hold of a Job deleted before it).
			r := &JobRecorder{Client: f.c, Recorder: f, Metrics: m, MaxHold: maxHold, APIs: tc.apis, Now: func() time.Time { return testNow },
				started: testNow.Add(-3 * maxHold)}
			if tc.coveragePods != nil {
				r.CoveragePods = newFixture(t, hooks{}, tc.coveragePods...).c
			}
			if tc.apiPods != nil || tc.listRefused {
				h := hooks{}
				if tc.listRefused {
					h.list = func(client.ObjectList) error {
						return apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("pods is forbidden"))
					}
				}
				r.APIReader = newFixture(t, h, tc.apiPods...).c
			}
			if tc.latePods != nil {
				late := newFixture(t, hooks{}, tc.latePods...).c
				r.LatePods = func(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
					var pods corev1.PodList
					err := late.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)})
					return pods.Items, err
				}
			}
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.job)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if res.RequeueAfter != tc.wantRequeueAfter {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeueAfter)
			}
			var got batchv1.Job
			switch err := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.job), &got); {
			case apierrors.IsNotFound(err):
				if tc.wantFinalizers != nil {
					t.Errorf("the Job is gone, want finalizers %v", tc.wantFinalizers)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if tc.wantFinalizers == nil {
					t.Errorf("the Job is still there with %v, want it gone", got.Finalizers)
				} else if diff := cmp.Diff(tc.wantFinalizers, got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("finalizers (-want +got):\n%s", diff)
				}
			}
			if n := len(f.writesOf("patch")); n != tc.wantPatches {
				t.Errorf("%d patches, want %d", n, tc.wantPatches)
			}
			if diff := cmp.Diff(tc.wantEvents, f.eventsOf("Job")); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for _, e := range f.events {
				if len(e.Note) > maxEventNote {
					t.Errorf("%s %s event: note of %d bytes, over the API server's %d", e.Type, e.Reason, len(e.Note), maxEventNote)
				}
			}
			if got := testutil.ToFloat64(m.Releases); got != tc.wantReleased {
				t.Errorf("releases = %v, want %v", got, tc.wantReleased)
			}
			if got := testutil.ToFloat64(m.HoldsExpired); got != tc.wantExpired {
				t.Errorf("expired holds = %v, want %v", got, tc.wantExpired)
			}
		})
	}
}

// uncounted marks a succeeded pod of job as not counted yet by the Job controller.
func uncounted(job *batchv1.Job) *batchv1.Job {
	job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"pod-uid"}}
	return job
}

// TestJobRecorderReleasesOnlyTheStateRecorded: the Job controller counts a last index of a
// Job deleted before it terminated, then takes its pods' tracking finalizers off, right
// after the recorder read the Job from its cache. The pods say nothing is left to count,
// the stale copy says the account recorded everything: releasing it would let the Job go
// with index 1 never recorded. The release tests the resourceVersion read, fails, and
// the Job stays held for the retry.
func TestJobRecorderReleasesOnlyTheStateRecorded(t *testing.T) {
	job := jobAt(record).Completed("0", 1).Deleting(testNow.Add(-time.Minute)).Obj()
	f := newFixture(t, hooks{}, job, recordingAccount(v1alpha1.TargetStatus{Job: "j", UID: "j-uid", Found: true, CompletedIndexes: "0"}))
	stale := interceptor.NewClient(f.c, interceptors.CountedRightAfterFirstRead("0,1", 2))
	r := &JobRecorder{Client: stale, APIReader: newFixture(t, hooks{}).c, MaxHold: time.Hour,
		Now: func() time.Time { return testNow }, started: testNow.Add(-time.Hour)}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)}); err == nil {
		t.Errorf("released from a copy older than the Job controller's last count; want the release refused and retried")
	}
	var got batchv1.Job
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatalf("the Job is gone (%v): index 1 never recorded", err)
	}
	if !slices.Equal(got.Finalizers, []string{record}) {
		t.Errorf("finalizers %v, want [%s]", got.Finalizers, record)
	}
}

// TestJobRecorderHolds: Hold adds the record finalizer, keeping the others, to a Job a live
// account names whose end is not recorded, including a JobSet child by its labels; never
// to a Job no account names, one already held, one being deleted, or one whose end every
// account recorded.
func TestJobRecorderHolds(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	child := wrappers.MakeJob("ts-workers-0", "ns").Indexed(2).UID("child-uid").JobSetChild(js, "workers", 0, 0).Obj()
	train := wrappers.MakeBatchAccount("train", "ns").Shards("W").AssignJobSet("ts", "workers", 0, "0", "0").Obj()
	recordedComplete := recordingAccount(v1alpha1.TargetStatus{Job: "j", UID: "j-uid", Found: true, CompletedIndexes: "0,1", Terminal: "Complete"})
	cases := []struct {
		name           string
		job            *batchv1.Job
		objs           []client.Object
		wantFinalizers []string
		wantHeld       float64
	}{
		{"named, running: held, the others kept", jobAt(foreground).Obj(), []client.Object{accountOfJ().Obj()}, []string{foreground, record}, 1},
		{"named, no finalizer at all: held", jobAt().Obj(), []client.Object{accountOfJ().Obj()}, []string{record}, 1},
		{"a JobSet child an account names: held", child, []client.Object{train}, []string{record}, 1},
		{"complete, not recorded yet: held", jobAt().Completed("0,1", 2).Complete(testNow).Obj(), []client.Object{accountOfJ().Obj()}, []string{record}, 1},
		{"complete and recorded by every account: not held", jobAt().Completed("0,1", 2).Complete(testNow).Obj(), []client.Object{recordedComplete}, nil, 0},
		{"no account names it: not held", jobAt().Obj(), nil, nil, 0},
		{"already held: unchanged", jobAt(record).Obj(), []client.Object{accountOfJ().Obj()}, []string{record}, 0},
		{"being deleted: no new finalizer", jobAt(foreground).Deleting(testNow).Obj(), []client.Object{accountOfJ().Obj()}, []string{foreground}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, append([]client.Object{tc.job}, tc.objs...)...)
			m := newJobRecordMetrics(prometheus.NewRegistry())
			r := &JobRecorder{Client: f.c, Metrics: m, Now: func() time.Time { return testNow }}
			if res, err := r.Hold(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.job)}); retried(res, err) {
				t.Fatalf("Hold = %+v, %v", res, err)
			}
			var got batchv1.Job
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(tc.job), &got); err != nil {
				t.Fatal(err)
			}
			// A strategic merge orders a merged list as it likes; finalizers are a set.
			if diff := cmp.Diff(tc.wantFinalizers, got.Finalizers, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(m.Holds); got != tc.wantHeld {
				t.Errorf("holds = %v, want %v", got, tc.wantHeld)
			}
		})
	}
}

// TestHeldJobSetChildIsObserved: a JobSet child deleted by a restart while no manager
// led, held by the record finalizer, is what the account observes (every child being
// deleted, none live): its final completed indexes become the record, and the account's
// status then lets the recorder release it.
func TestHeldJobSetChildIsObserved(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	child := wrappers.MakeJob("ts-workers-0", "ns").Indexed(4).UID("child-uid").JobSetChild(js, "workers", 0, 0).
		Completed("0-2", 3).Finalizers(record).Deleting(testNow.Add(-time.Minute)).Obj()
	ba := wrappers.MakeBatchAccount("train", "ns").ShardCount("s", 4).AssignJobSet("ts", "workers", 0, "0-3", "0-3").Obj()
	// Before the manager stopped, the account saw index 0 only.
	ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "jobset/ts/workers/0", Job: child.Name, UID: child.UID, Found: true, Completions: 4, CompletedIndexes: "0"}}
	f := newFixture(t, hooks{}, js, child, ba)
	if res, err := f.reconcile("train"); retried(res, err) {
		t.Fatalf("reconcile = %+v, %v", res, err)
	}
	got := f.account(t, "train")
	if tg := got.Status.Targets[0]; tg.UID != child.UID || tg.CompletedIndexes != "0-2" {
		t.Errorf("target %s: uid %s completed %q; want the held child's final 0-2", tg.Name, tg.UID, tg.CompletedIndexes)
	}
	r := &JobRecorder{Client: f.c, Now: func() time.Time { return testNow }}
	if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(child)}); retried(res, err) {
		t.Fatalf("release = %+v, %v", res, err)
	}
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(child), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("the recorded child is still held (%v)", err)
	}
	// Gone now: a restart in progress, its final coverage in history. The account looks
	// for the successor again (unfoundRecheck) besides waiting for its event.
	if res, err := f.reconcile("train"); err != nil || res.RequeueAfter != MaxUnfoundRecheck {
		t.Fatalf("reconcile = %+v, %v; want a recheck in %v", res, err, MaxUnfoundRecheck)
	}
	got = f.account(t, "train")
	if h := got.Status.History; len(h) != 1 || h[0].UID != child.UID || h[0].CompletedIndexes != "0-2" {
		t.Errorf("history %+v; want the child with 0-2", h)
	}
}

// TestHeldJobChangedPassesWhatMayReleaseIt: the release controller hears a held Job's
// finalizers, deletion, end and, while it is deleted, status; nothing of Jobs never held,
// nor a running held Job's progress.
func TestHeldJobChangedPassesWhatMayReleaseIt(t *testing.T) {
	held := jobAt(record).Obj()
	cases := []struct {
		name     string
		old, new *batchv1.Job
		want     bool
	}{
		{"progress of a running held Job", held, jobAt(record).Completed("0", 1).Obj(), false},
		{"its end", held, jobAt(record).Completed("0,1", 2).Complete(testNow).Obj(), true},
		{"its deletion starting", held, jobAt(record).Deleting(testNow).Obj(), true},
		{"status while being deleted", jobAt(record).Deleting(testNow).Obj(), jobAt(record).Deleting(testNow).Completed("0", 1).Obj(), true},
		{"finalizers changed", held, jobAt(foreground, record).Obj(), true},
		{"a Job never held, ending", jobAt().Obj(), jobAt().Complete(testNow).Obj(), false},
	}
	for _, tc := range cases {
		if got := heldJobChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: passes %v, want %v", tc.name, got, tc.want)
		}
	}
	if !heldJobChanged.Create(event.CreateEvent{Object: held}) || heldJobChanged.Create(event.CreateEvent{Object: jobAt().Obj()}) {
		t.Error("creation: want only held Jobs passed")
	}
	if !jobAppeared.Create(event.CreateEvent{Object: jobAt().Obj()}) ||
		jobAppeared.Update(event.UpdateEvent{ObjectOld: held, ObjectNew: jobAt().Obj()}) {
		t.Error("the hold controller must hear creations only, never the finalizer's removal")
	}
}

// TestAccountEventsWakeTheJobsTheyRecord: a status write wakes only the Jobs whose entry
// it changed; a spec change or deletion every Job named before and after, JobSet
// children from the cache.
func TestAccountEventsWakeTheJobsTheyRecord(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	child := wrappers.MakeJob("ts-workers-0", "ns").UID("child-uid").JobSetChild(js, "workers", 0, 0).Obj()
	f := newFixture(t, hooks{}, child)
	r := &JobRecorder{Client: f.c}
	ctx := context.Background()

	was := wrappers.MakeBatchAccount("a", "ns").Generation(1).AssignJob("j", "0", "A").AssignJob("k", "0", "B").Obj()
	was.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/j", Job: "j", UID: "j-uid", CompletedIndexes: "0"}, {Name: "job/k", Job: "k", UID: "k-uid"}}
	now := was.DeepCopy()
	now.Status.Targets[1].Terminal = "Complete"
	q := &recordingQueue{}
	r.accountRecordsJobs().Update(ctx, event.UpdateEvent{ObjectOld: was, ObjectNew: now}, q)
	if !slices.Equal(q.added, []string{"k"}) {
		t.Errorf("status write woke %v, want [k]", q.added)
	}

	moved := wrappers.MakeBatchAccount("a", "ns").Generation(2).AssignJobSet("ts", "workers", 0, "0", "0").Obj()
	q = &recordingQueue{}
	r.accountRecordsJobs().Update(ctx, event.UpdateEvent{ObjectOld: was, ObjectNew: moved}, q)
	if !slices.Equal(q.added, []string{"j", "k", "ts-workers-0"}) {
		t.Errorf("spec change woke %v, want [j k ts-workers-0]", q.added)
	}
	q = &recordingQueue{}
	r.accountRecordsJobs().Delete(ctx, event.DeleteEvent{Object: was}, q)
	if !slices.Equal(q.added, []string{"j", "k"}) {
		t.Errorf("deletion woke %v, want [j k]", q.added)
	}
	q = &recordingQueue{}
	r.accountNamesJobs().Create(ctx, event.CreateEvent{Object: moved}, q)
	if !slices.Equal(q.added, []string{"ts-workers-0"}) {
		t.Errorf("creation woke %v for the hold, want [ts-workers-0]", q.added)
	}
}

// cacheOf is a client whose reads see only the cache (a client holding what the
// manager's label-selected cache holds) and whose writes reach the API server.
type cacheOf struct {
	client.Client // the API server: writes
	cache         client.Reader
}

func (c cacheOf) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c cacheOf) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}

// TestHeldJobOutOfScopeIsReleased: a held Job that left the cache, its scope label taken
// off, is released (no change of it would reach the recorder again, and deleted it would
// stay Terminating for good); a Job still labelled (the cache lags) or gone stays as it is.
func TestHeldJobOutOfScopeIsReleased(t *testing.T) {
	cases := []struct {
		name           string
		job            *batchv1.Job // as the API server holds it; nil: gone
		wantFinalizers []string
	}{
		{name: "label taken off, running", job: jobAt(record, foreground).Obj(), wantFinalizers: []string{foreground}},
		{name: "label taken off, being deleted", job: jobAt(record, foreground).Deleting(testNow).Obj(), wantFinalizers: []string{foreground}},
		{name: "still labelled: the cache lags", job: jobAt(record).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(), wantFinalizers: []string{record}},
		{name: "gone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.job != nil {
				objs = append(objs, tc.job)
			}
			live := newFixture(t, hooks{}, objs...)
			cache := newFixture(t, hooks{})
			r := &JobRecorder{Client: cacheOf{Client: live.c, cache: cache.c}, APIReader: live.c, Now: func() time.Time { return testNow }}
			key := client.ObjectKey{Namespace: "ns", Name: "j"}
			if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); retried(res, err) {
				t.Fatalf("Reconcile = %+v, %v", res, err)
			}
			if tc.job == nil {
				return
			}
			var got batchv1.Job
			if err := live.c.Get(context.Background(), key, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantFinalizers, got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeldJobOutOfScopeComesBackWhileAnAccountWaits: a held Job being deleted whose
// scope label was taken off, while an account naming it has not recorded its end, is
// labelled again rather than released, so that it comes back into the recorder's sight.
func TestHeldJobOutOfScopeComesBackWhileAnAccountWaits(t *testing.T) {
	job := jobAt(record).Completed("0-1", 2).Complete(testNow.Add(-time.Second)).Deleting(testNow).Obj()
	acct := accountOfJ().Obj() // status empty: the end is not recorded
	live := newFixture(t, hooks{}, job, acct)
	cache := newFixture(t, hooks{}, acct.DeepCopy())
	r := &JobRecorder{Client: cacheOf{Client: live.c, cache: cache.c}, APIReader: live.c, Now: func() time.Time { return testNow }}
	key := client.ObjectKeyFromObject(job)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	var got batchv1.Job
	if err := live.c.Get(context.Background(), key, &got); err != nil {
		t.Fatalf("Job gone: released before account %s recorded its end (%v)", acct.Name, err)
	}
	if !recordHeld(&got) {
		t.Errorf("released before account %s recorded its end; want held (up to MaxHold) or relabelled", acct.Name)
	}
}

// TestSweepReleasesJobsUnlabelledWhileNoManagerLed: a held Job whose scope label was
// taken off while no manager led is not in the new leader's cache, so no event brings
// it to the recorder. The sweep as the manager starts to lead finds the held Jobs
// without the label, in every namespace, and each one it sends is released by
// Reconcile (or labelled again while an account waits:
// TestHeldJobOutOfScopeComesBackWhileAnAccountWaits);
// Jobs still labelled or not held are not sent.
func TestSweepReleasesJobsUnlabelledWhileNoManagerLed(t *testing.T) {
	deleting := jobAt(record, foreground).Deleting(testNow).Obj()
	elsewhere := wrappers.MakeJob("k", "other").Indexed(2).Finalizers(record).Obj()
	labelled := wrappers.MakeJob("labelled", "ns").Indexed(2).Finalizers(record).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj()
	free := wrappers.MakeJob("free", "ns").Indexed(2).Obj()
	live := newFixture(t, hooks{}, deleting, elsewhere, labelled, free)
	cache := newFixture(t, hooks{}, labelled.DeepCopy())
	r := &JobRecorder{Client: cacheOf{Client: live.c, cache: cache.c}, APIReader: live.c, Now: func() time.Time { return testNow }}

	sent := sweptAndReconciled(t, "Jobs", 2, r.sweepOutOfScope, r.Reconcile)
	if want := []string{"ns/j", "other/k"}; !slices.Equal(sent, want) {
		t.Errorf("sent %v, want %v", sent, want)
	}
	for _, j := range []*batchv1.Job{deleting, elsewhere, labelled} {
		var got batchv1.Job
		if err := live.c.Get(context.Background(), client.ObjectKeyFromObject(j), &got); err != nil {
			t.Fatal(err)
		}
		if want := j != labelled; recordHeld(&got) == want {
			t.Errorf("%s: held %v after the sweep, want released %v", j.Name, recordHeld(&got), want)
		}
	}
}

// TestHeldOutOfScopeSelectsHeldObjectsOutsideTheCache: the start-up sweeps of the Job
// recorder and the pod releaser list, through one helper, the objects their finalizer
// holds that their cache does not show: Jobs without a scope label, pods without
// scope=results. Objects not held, or in sight of the cache, are not listed.
func TestHeldOutOfScopeSelectsHeldObjectsOutsideTheCache(t *testing.T) {
	j := wrappers.MakeJob("j", "ns").Indexed(2).Obj()
	pod := func(name string) *wrappers.PodWrapper { return wrappers.MakeIndexPod(j, name, 0).UID(name + "-uid") }
	objs := []client.Object{
		wrappers.MakeJob("unlabelled", "ns").Indexed(2).Finalizers(record).Obj(),
		wrappers.MakeJob("coverage", "ns").Indexed(2).Finalizers(record).Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Obj(),
		wrappers.MakeJob("free", "ns").Indexed(2).Obj(),
		wrappers.MakeJob("elsewhere", "other").Indexed(2).Finalizers("example.com/keep", record).Obj(),
		pod("unlabelled").NoLabel(v1alpha1.LabelScope).Finalizers(v1alpha1.ResultFinalizer).Obj(),
		pod("coverage").Label(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).Finalizers(v1alpha1.ResultFinalizer).Obj(),
		pod("results").Label(v1alpha1.LabelScope, v1alpha1.ScopeResults).Finalizers(v1alpha1.ResultFinalizer).Obj(),
		pod("free").NoLabel(v1alpha1.LabelScope).Obj(),
		pod("record-only").NoLabel(v1alpha1.LabelScope).Finalizers(record).Obj(),
	}
	c := fakeClient(t, objs...)
	for _, tc := range []struct {
		name string
		list func(context.Context) ([]client.ObjectKey, error)
		want []string
	}{
		{"Jobs held for their record without a scope label", (&JobRecorder{APIReader: c}).HeldOutOfScope, []string{"ns/unlabelled", "other/elsewhere"}},
		{"pods held for their result outside the results scope", (&PodReleaser{APIReader: c}).HeldOutOfScope, []string{"ns/coverage", "ns/unlabelled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := tc.list(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, k.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHeldJobsOfNamespaceWoken: the start of a namespace's deletion wakes the Jobs the
// record finalizer holds there (JobRecorder.heldJobsOfNamespace), whose wait for an
// account their short form declares ends then. A Job deleted before, as
// ttlSecondsAfterFinished: 0 deletes it, sends no event of its own when its namespace
// goes, and would keep it until relations.ShortFormWait passed.
func TestHeldJobsOfNamespaceWoken(t *testing.T) {
	deleting := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &metav1.Time{Time: testNow}}}
	for _, tc := range []struct {
		name string
		jobs []client.Object
		want []string
	}{
		{name: "a held Job deleted before: woken",
			jobs: []client.Object{jobAt(v1alpha1.RecordFinalizer, foreground).Deleting(testNow.Add(-time.Second)).Obj()}, want: []string{"ns/j"}},
		{name: "a Job not held: not woken", jobs: []client.Object{jobAt().Obj()}},
		{name: "a held Job of another namespace: not woken",
			jobs: []client.Object{wrappers.MakeJob("j", "other").Indexed(2).Finalizers(v1alpha1.RecordFinalizer).Obj()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, tc.jobs...)
			var got []string
			for _, req := range (&JobRecorder{Client: f.c}).heldJobsOfNamespace(context.Background(), deleting) {
				got = append(got, req.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("woken %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJobRecorderHoldsWhileTheCachesLag: TrainJob tj's Workload finished, its JobSet
// shows no end yet, and the account has followed no child: the reconciler cannot tell
// the JobSet that ran from one Trainer rendered again until the caches agree
// (kinds.CacheLagError), and may then follow the child being deleted and record its end.
// The recorder holds the child while the reconciler waits (CacheLagWait); past that,
// the caches are taken as they are, as the reconciler takes them: no child, released.
func TestJobRecorderHoldsWhileTheCachesLag(t *testing.T) {
	for _, tc := range []struct {
		name         string
		finished     time.Time
		wantReleased bool
	}{
		{"the Workload finished 5 s ago: held", testNow.Add(-5 * time.Second), false},
		{"the Workload finished an hour ago: released", testNow.Add(-time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered := newRenderedTrainJob()
			js := rendered.jobSet("js-uid", testNow.Add(-2*time.Hour))
			wl := rendered.workload().Admitted("cq", testNow.Add(-2*time.Hour)).Finished(tc.finished).Obj()
			child := nodeChild(js, "child-uid").Created(testNow.Add(-2*time.Hour)).Completed("0", 1).
				Finalizers(record).Deleting(testNow.Add(-time.Second)).Obj()
			acct := wrappers.MakeBatchAccount("acct", "ns").Shards("A", "B").AssignTrainJob("tj", "node", 0, "0-1", "0-1").Obj()
			f := newFixture(t, hooks{}, rendered.tj, js, wl, child, acct)
			r := &JobRecorder{Client: f.c, Now: func() time.Time { return testNow }, started: testNow.Add(-time.Hour)}
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(child)}); err != nil {
				t.Fatal(err)
			}
			err := f.c.Get(context.Background(), client.ObjectKeyFromObject(child), &batchv1.Job{})
			if released := apierrors.IsNotFound(err); released != tc.wantReleased {
				t.Errorf("released = %v (%v), want %v", released, err, tc.wantReleased)
			}
		})
	}
}
