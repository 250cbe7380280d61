package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestDeletedJobsKeepsTheLastStateForAWhile: a deleted Job's last state is found by name
// for deletedJobTTL, then forgotten; a full store makes room by dropping the oldest.
func TestDeletedJobsKeepsTheLastStateForAWhile(t *testing.T) {
	var d deletedJobs
	job := wrappers.MakeJob("j", "ns").UID("uid-j").Obj()
	d.add(job, testNow)
	for _, tc := range []struct {
		name      string
		ns, job   string
		after     time.Duration
		wantFound bool
	}{
		{"just deleted", "ns", "j", time.Second, true},
		{"still within the TTL", "ns", "j", deletedJobTTL, true},
		{"after the TTL", "ns", "j", deletedJobTTL + time.Second, false},
		{"another namespace", "other", "j", time.Second, false},
		{"another name", "ns", "k", time.Second, false},
	} {
		if got := d.get(tc.ns, tc.job, testNow.Add(tc.after)); (got != nil) != tc.wantFound {
			t.Errorf("%s: found %v, want %v", tc.name, got != nil, tc.wantFound)
		}
	}

	var full deletedJobs
	for i := range maxDeletedJobs {
		full.add(wrappers.MakeJob(fmt.Sprintf("j-%05d", i), "ns").Obj(), testNow.Add(time.Duration(i)*time.Millisecond))
	}
	full.add(wrappers.MakeJob("newest", "ns").Obj(), testNow.Add(time.Hour/10))
	now := testNow.Add(time.Hour / 10)
	if full.get("ns", "newest", now) == nil || full.get("ns", "j-00000", now) != nil || full.get("ns", fmt.Sprintf("j-%05d", maxDeletedJobs-1), now) == nil {
		t.Errorf("a full store must drop the oldest and keep the newest")
	}
	if n := len(full.jobs); n > maxDeletedJobs {
		t.Errorf("%d entries, bound %d", n, maxDeletedJobs)
	}
}

// TestJobEventsKeepDeletedJobsAccountsName: a deleted Job some account names is kept
// (and its accounts woken); a deleted Job no account names is not kept.
func TestJobEventsKeepDeletedJobsAccountsName(t *testing.T) {
	f := newFixture(t, hooks{}, wrappers.MakeBatchAccount("a", "ns").Shards("A").AssignJob("named", "0", "A").Obj())
	r := f.reconciler()
	q := &recordingQueue{}
	for _, name := range []string{"named", "unnamed"} {
		r.jobEvents().Delete(context.Background(), event.DeleteEvent{Object: wrappers.MakeJob(name, "ns").Obj()}, q)
	}
	if r.deletedJobs.get("ns", "named", testNow) == nil || r.deletedJobs.get("ns", "unnamed", testNow) != nil {
		t.Errorf("kept: named %v, unnamed %v; want only the named Job", r.deletedJobs.get("ns", "named", testNow) != nil, r.deletedJobs.get("ns", "unnamed", testNow) != nil)
	}
	if !slices.Equal(q.added, []string{"a"}) {
		t.Errorf("woken %v, want [a]", q.added)
	}
}

// TestReconcileRecordsTheLastStateOfADeletedJob: the account last saw its Job running; the
// Job is gone from the cache, deleted the moment it finished. Its last state completes the
// record: Complete, both shards covered, Accepted.
func TestReconcileRecordsTheLastStateOfADeletedJob(t *testing.T) {
	ba := wrappers.MakeBatchAccount("a", "ns").Shards("A", "B").AssignJob("j", "0-1", "A", "B").Obj()
	ba.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/j", Job: "j", UID: "uid-j", Found: true, Completions: 2, Required: "0,1", CompletedIndexes: "0"}}
	f := newFixture(t, hooks{}, ba)
	r := f.reconciler()
	final := wrappers.MakeJob("j", "ns").UID("uid-j").Indexed(2).Completed("0,1", 2).Complete(testNow).Obj()
	r.deletedJobs.add(final, testNow)
	if res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "a"}}); retried(res, err) {
		t.Fatalf("reconcile = %+v, %v", res, err)
	}
	st := f.account(t, "a").Status
	tgt := st.Targets[0]
	if !tgt.Deleted || tgt.Terminal != string(batchv1.JobComplete) || st.Shards.Covered != 2 {
		t.Errorf("record: deleted %v terminal %q, covered %d; want deleted, Complete, 2", tgt.Deleted, tgt.Terminal, st.Shards.Covered)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted); c.Status != metav1.ConditionTrue {
		t.Errorf("Accepted = %s %s (%q)", c.Status, c.Reason, c.Message)
	}
}
