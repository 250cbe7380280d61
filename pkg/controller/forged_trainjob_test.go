package controller

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestForgedChildOfTrainJobGetsNoWorkload: TrainJob vic is queued (its Workload,
// controlled by the TrainJob, admitted), and Trainer has rendered its JobSet vic or not
// yet. A namespace editor makes a Job vic-node-0, named and labelled as child 0 of
// replicatedJob node of a JobSet vic, with a controller reference to a JobSet vic that
// carries the TrainJob's UID (readable; an apiVersion the garbage collector cannot
// resolve keeps the Job), runs it outside Kueue and names it in an account of their own
// by its Job name. A JobSet and its TrainJob share a name, never a UID: the Job is no
// child of anything of vic's, so vic's Workload is none of the account's and must carry
// no verdict of it.
func TestForgedChildOfTrainJobGetsNoWorkload(t *testing.T) {
	for _, tc := range []struct {
		name     string
		label    bool
		rendered bool
	}{
		{name: "the Workload from the cache"},
		// Kueue labels every Workload it makes with its owner's UID: the read of the API
		// server for a Workload not cached yet must not take it either.
		{name: "the Workload labelled with vic's UID, read from the API server", label: true},
		{name: "Trainer rendered JobSet vic since", rendered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vic := wrappers.MakeTrainJob("vic", "ns", "torch-distributed").UID("vic-uid").Obj()
			w := wrappers.MakeWorkload("trainjob-vic", "ns").UID("vic-wl").
				ControlledBy(vic, trainer.GroupVersion.WithKind(trainer.TrainJobKind)).Admitted("h100-queue", testNow.Add(-time.Hour))
			if tc.label {
				w = w.Label(kueueconstants.JobUIDLabel, string(vic.UID))
			}
			wl := w.Obj()
			// The JobSet vic the editor's reference names: it does not exist, and its UID
			// is the TrainJob's.
			named := wrappers.MakeJobSet("vic", "ns").Obj()
			named.UID = vic.UID
			x := wrappers.MakeJob("vic-node-0", "ns").Indexed(2).UID("x-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeCoverage).
				JobSetChild(named, "node", 0, 0).Completed("0-1", 2).Complete(testNow).Obj()
			x.OwnerReferences[0].APIVersion = "jobset.x-k8s.io/v9"
			ba := wrappers.MakeBatchAccount("mine", "ns").Shards("A", "B").AssignJob(x.Name, "0-1", "A", "B").Obj()
			objs := []client.Object{vic, wl, x, ba}
			if tc.rendered {
				objs = append(objs, wrappers.MakeJobSet("vic", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("node").Obj()).
					ControlledBy(vic, trainer.GroupVersion.WithKind(trainer.TrainJobKind), "vic-js-uid").Obj())
			}
			f := newFixture(t, hooks{}, objs...)
			checkWorkloadNotTaken(t, f, reconcileTwice(t, f, "mine"), wl)
		})
	}
}
