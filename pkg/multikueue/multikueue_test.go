package multikueue

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TestDispatched: only a Job managed by MultiKueue runs elsewhere.
func TestDispatched(t *testing.T) {
	for name, tc := range map[string]struct {
		job  *batchv1.Job
		want bool
	}{
		"no Job":             {nil, false},
		"no managedBy":       {&batchv1.Job{}, false},
		"the Job controller": {&batchv1.Job{Spec: batchv1.JobSpec{ManagedBy: ptr.To(batchv1.JobControllerName)}}, false},
		"another controller": {&batchv1.Job{Spec: batchv1.JobSpec{ManagedBy: ptr.To("example.com/other")}}, false},
		"MultiKueue":         {&batchv1.Job{Spec: batchv1.JobSpec{ManagedBy: ptr.To("kueue.x-k8s.io/multikueue")}}, true},
	} {
		if got := Dispatched(tc.job); got != tc.want {
			t.Errorf("%s: Dispatched = %v, want %v", name, got, tc.want)
		}
	}
}

// TestPrebuiltWorkload reads Kueue v0.17's label and v0.18's annotation, the annotation
// first.
func TestPrebuiltWorkload(t *testing.T) {
	for name, tc := range map[string]struct {
		labels, annotations map[string]string
		want                string
	}{
		"not a copy":            {nil, nil, ""},
		"v0.17 label":           {map[string]string{PrebuiltWorkloadKey: "job-j-d41e5"}, nil, "job-j-d41e5"},
		"v0.18 annotation":      {nil, map[string]string{PrebuiltWorkloadKey: "job-j-d41e5"}, "job-j-d41e5"},
		"annotation over label": {map[string]string{PrebuiltWorkloadKey: "old"}, map[string]string{PrebuiltWorkloadKey: "new"}, "new"},
	} {
		obj := &metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}
		if got := PrebuiltWorkload(obj); got != tc.want {
			t.Errorf("%s: PrebuiltWorkload = %q, want %q", name, got, tc.want)
		}
	}
}

// TestClusters: the worker named by status.clusterName, the nominated ones bounded.
func TestClusters(t *testing.T) {
	var wl kueue.Workload
	if Cluster(&wl) != "" || Nominated(&wl) != nil {
		t.Errorf("a Workload not dispatched names clusters: %q %q", Cluster(&wl), Nominated(&wl))
	}
	wl.Status.ClusterName = ptr.To("worker-a")
	if got := Cluster(&wl); got != "worker-a" {
		t.Errorf("Cluster = %q, want worker-a", got)
	}
	for i := range MaxNominated + 3 {
		wl.Status.NominatedClusterNames = append(wl.Status.NominatedClusterNames, string(rune('a'+i)))
	}
	got := Nominated(&wl)
	if len(got) != MaxNominated || !slices.Equal(got, wl.Status.NominatedClusterNames[:MaxNominated]) {
		t.Errorf("Nominated = %q, want the first %d", got, MaxNominated)
	}
	got[0] = "changed"
	if wl.Status.NominatedClusterNames[0] == "changed" {
		t.Error("Nominated shares the Workload's slice")
	}
}

// TestCopiedFor: a Job is a MultiKueue copy only with both marks MultiKueue gives it.
func TestCopiedFor(t *testing.T) {
	for name, tc := range map[string]struct {
		labels, annotations map[string]string
		want                string
	}{
		"not a copy":               {nil, nil, ""},
		"v0.17 copy":               {map[string]string{PrebuiltWorkloadKey: "job-j-d41e5", OriginLabel: "multikueue"}, nil, "job-j-d41e5"},
		"v0.18 copy":               {map[string]string{OriginLabel: "multikueue"}, map[string]string{PrebuiltWorkloadKey: "job-j-d41e5"}, "job-j-d41e5"},
		"prebuilt name, no origin": {map[string]string{PrebuiltWorkloadKey: "job-j-d41e5"}, nil, ""},
		"origin, no prebuilt name": {map[string]string{OriginLabel: "multikueue"}, nil, ""},
	} {
		obj := &metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}
		if got := CopiedFor(obj); got != tc.want {
			t.Errorf("%s: CopiedFor = %q, want %q", name, got, tc.want)
		}
	}
}
