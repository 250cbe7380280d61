package resolve

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestKindNameUse: the usage line names an account, a Workload and every kind of target,
// in the registry's order.
func TestKindNameUse(t *testing.T) {
	if got, want := KindNameUse("explain"), "explain (account|workload|job|jobset|trainjob) NAME"; got != want {
		t.Errorf("KindNameUse = %q, want %q", got, want)
	}
}

// TestResolveJobSetRerun: a JobSet applied again under the name of an Accepted account's
// JobSet runs under a Workload of its own, which the account's record does not name
// (account.Follows): the account does not resolve for it, and says why. The JobSet on
// record, and one Kueue gave no Workload, resolve by name as before.
func TestResolveJobSetRerun(t *testing.T) {
	const ns = clitest.Namespace
	accepted := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 4).AssignJobSet("train", "workers", 0, "0-3", "0-3").Generation(1).Obj()
	accepted.Status = v1alpha1.BatchAccountStatus{
		Targets: []v1alpha1.TargetStatus{{
			Name: "jobset/train/workers/0", Job: "train-workers-0", UID: "job-old", Found: true, Terminal: "Complete",
			Workload: &v1alpha1.WorkloadObservation{Name: "jobset-train-old", UID: "wl-old", Admitted: true, Finished: true},
		}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}},
	}
	jobSet := func(uid string) *jobset.JobSet {
		js := wrappers.MakeJobSet("train", ns).Obj()
		js.UID = types.UID(uid)
		return js
	}
	workload := func(name, uid string, owner *jobset.JobSet) client.Object {
		return wrappers.MakeWorkload(name, ns).UID(uid).ForJobSet(owner).Obj()
	}
	reapplied, onRecord := jobSet("js-new"), jobSet("js-old")
	cases := []struct {
		name    string
		objs    []client.Object
		wantErr string
	}{
		{name: "applied again", objs: []client.Object{accepted.DeepCopy(), reapplied, workload("jobset-train-new", "wl-new", reapplied)},
			wantErr: `no BatchAccount follows JobSet "train" (Workload "jobset-train-new", uid wl-new): BatchAccount "train" names JobSet "train" but was Accepted on an earlier run of the name (Job uid job-old)`},
		{name: "on record", objs: []client.Object{accepted.DeepCopy(), onRecord, workload("jobset-train-old", "wl-old", onRecord)}},
		{name: "no Workload", objs: []client.Object{accepted.DeepCopy(), jobSet("js-new")}},
		{name: "deleted", objs: []client.Object{accepted.DeepCopy()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			accts, _, err := Resolve(t.Context(), clitest.FakeClient(tc.objs...), ns, "jobset", "train")
			switch {
			case tc.wantErr == "" && (err != nil || len(accts) != 1):
				t.Errorf("Resolve = %d accounts, %v; want the account", len(accts), err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Errorf("Resolve = %d accounts, %v\nwant error %s", len(accts), err, tc.wantErr)
			}
		})
	}
}
