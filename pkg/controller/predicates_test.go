package controller

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func TestWorkloadChanged(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base := func() *kueue.Workload {
		return wrappers.MakeWorkload("job-j", "").Generation(1).
			Condition(metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: metav1.NewTime(at)}).
			Condition(metav1.Condition{Type: v1alpha1.WorkloadConditionShardsCovered, Status: metav1.ConditionFalse, Reason: "ShardsMissing", Message: "1/4", LastTransitionTime: metav1.NewTime(at)}).
			Obj()
	}
	cases := map[string]struct {
		change func(*kueue.Workload)
		want   bool
	}{
		"nothing":                   {change: func(*kueue.Workload) {}, want: false},
		"only our coverage message": {change: func(w *kueue.Workload) { w.Status.Conditions[1].Message = "2/4" }, want: false},
		"our Accepted condition added": {change: func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: v1alpha1.WorkloadConditionAccepted})
		}, want: false},
		"our aggregated message, several accounts": {change: func(w *kueue.Workload) {
			w.Status.Conditions[1].Message = "2 accounts; BatchAccount a: 2/4; BatchAccount b: 1/4"
		}, want: true},
		"Kueue admits": {change: func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue})
		}, want: true},
		"Kueue evicts (condition flips)": {change: func(w *kueue.Workload) { w.Status.Conditions[0].Status = metav1.ConditionFalse }, want: true},
		"admission recorded":             {change: func(w *kueue.Workload) { w.Status.Admission = &kueue.Admission{ClusterQueue: "gpu"} }, want: true},
		"spec changed":                   {change: func(w *kueue.Workload) { w.Generation = 2 }, want: true},
		"deleted":                        {change: func(w *kueue.Workload) { now := metav1.Now(); w.DeletionTimestamp = &now }, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, updated := base(), base()
			tc.change(updated)
			if got := workloadChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != tc.want {
				t.Errorf("workloadChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSucceededPodArrived: the cache of succeeded coverage pods (metadata only) wakes
// accounts when an index pod enters it (it succeeded) or leaves it (deleted), never for
// its later updates, and never for a pod without a completion index.
func TestSucceededPodArrived(t *testing.T) {
	pod := func(index bool) *metav1.PartialObjectMetadata {
		m := relations.PodMetadata()
		m.Name, m.Namespace = "j-0", "ns"
		if index {
			m.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}
		}
		return m
	}
	cases := []struct {
		name string
		pass func(p *metav1.PartialObjectMetadata) bool
		want [2]bool // an index pod, a pod without an index
	}{
		{"create (it succeeded)", func(p *metav1.PartialObjectMetadata) bool {
			return succeededPodArrived.Create(event.CreateEvent{Object: p})
		}, [2]bool{true, false}},
		{"update (a finalizer removed)", func(p *metav1.PartialObjectMetadata) bool {
			q := p.DeepCopy()
			q.Finalizers = nil
			return succeededPodArrived.Update(event.UpdateEvent{ObjectOld: p, ObjectNew: q})
		}, [2]bool{false, false}},
		{"delete", func(p *metav1.PartialObjectMetadata) bool {
			return succeededPodArrived.Delete(event.DeleteEvent{Object: p})
		}, [2]bool{true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := [2]bool{tc.pass(pod(true)), tc.pass(pod(false))}; got != tc.want {
				t.Errorf("passes (index pod, pod without index) = %v, want %v", got, tc.want)
			}
		})
	}
}
