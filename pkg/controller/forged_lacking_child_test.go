package controller

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestForgedChildTheJobSetLacksGetsNoWorkload: a namespace editor makes a Job vic-zzz-0, named
// and labelled as child 0 of a replicatedJob zzz that JobSet vic does not have, with a
// controller reference to vic by its real name and UID (both readable), runs it outside
// Kueue and names it in an account of their own. vic lacks that child (jobset.Lacks), so
// the Job is none of vic's: vic's Workload must carry no verdict of the account.
func TestForgedChildTheJobSetLacksGetsNoWorkload(t *testing.T) {
	vic := wrappers.MakeJobSet("vic", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	vic.UID = "vic-uid"
	wl := wrappers.MakeWorkload("jobset-vic", "ns").UID("vic-wl").ForJobSet(vic).Admitted("h100-queue", testNow.Add(-time.Hour)).Obj()
	x := wrappers.MakeJob("vic-zzz-0", "ns").Indexed(2).UID("x-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
		Label(jobset.JobSetNameKey, "vic").Label(jobset.ReplicatedJobNameKey, "zzz").Label(jobset.JobIndexKey, "0").
		ControlledBy(vic, jobset.SchemeGroupVersion.WithKind("JobSet")).Completed("0-1", 2).Complete(testNow).Obj()
	ba := wrappers.MakeBatchAccount("mine", "ns").Shards("A", "B").AssignJob("vic-zzz-0", "0-1", "A", "B").Obj()
	f := newFixture(t, hooks{}, vic, wl, x, ba)
	for range 2 {
		if _, err := f.reconcile("mine"); err != nil {
			t.Fatal(err)
		}
	}
	st := f.account(t, "mine").Status
	if len(st.Targets) != 1 || st.Targets[0].Workload != nil {
		t.Errorf("the account took vic's Workload for its Job's: %+v", st.Targets[0].Workload)
	}
	var got kueue.Workload
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(wl), &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == v1alpha1.WorkloadConditionAccepted || c.Type == v1alpha1.WorkloadConditionShardsCovered {
			t.Errorf("vic's Workload carries the account's verdict: %s=%s %s", c.Type, c.Status, c.Message)
		}
	}
}
