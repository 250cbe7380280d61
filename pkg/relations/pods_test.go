package relations

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// pod is a pod named and identified uid in phase, controlled by Job j of UID owner (none
// when ""), with completion index annotation index (none when "").
func pod(uid string, phase corev1.PodPhase, owner types.UID, index string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), Annotations: map[string]string{}}, Status: corev1.PodStatus{Phase: phase}}
	if index != "" {
		p.Annotations[batchv1.JobCompletionIndexAnnotation] = index
	}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: owner, Controller: ptr.To(true)}}
	}
	return p
}

// TestSuccessfulAttempts: only succeeded pods controlled by the Job (this UID), or
// orphaned from it (its index-pod mark names it), with one completion index are attempts
// of its identity; repeats of an index all count.
func TestSuccessfulAttempts(t *testing.T) {
	job := job("j")
	pods := []corev1.Pod{
		pod("ok-0", corev1.PodSucceeded, job.UID, "0"),
		pod("ok-2", corev1.PodSucceeded, job.UID, "2"),
		pod("failed", corev1.PodFailed, job.UID, "1"),
		pod("running", corev1.PodRunning, job.UID, "1"),
		pod("old-job", corev1.PodSucceeded, "uid-old", "1"),
		pod("orphan", corev1.PodSucceeded, "", "1"),
		pod("no-index", corev1.PodSucceeded, job.UID, ""),
		pod("two-indexes", corev1.PodSucceeded, job.UID, "1,2"),
		pod("bad-index", corev1.PodSucceeded, job.UID, "x"),
		pod("ok-2b", corev1.PodSucceeded, job.UID, "2"),
	}
	orphaned := wrappers.MakeIndexPod(job, "orphaned-3", 3).NoOwner().Succeeded(t0, "").Obj()
	orphaned.UID = "orphaned-3"
	pods = append(pods, *orphaned)
	want := []account.PodAttempt{{UID: "ok-0", Index: 0}, {UID: "ok-2", Index: 2}, {UID: "ok-2b", Index: 2}, {UID: "orphaned-3", Index: 3}}
	if got := SuccessfulAttempts(job, pods); !slices.Equal(got, want) {
		t.Errorf("attempts %+v; want %+v", got, want)
	}
}

// TestSuccessfulAttemptsUncounted: a success is uncounted while the pod keeps the Job
// controller's tracking finalizer or is listed in the Job's uncountedTerminatedPods.
func TestSuccessfulAttemptsUncounted(t *testing.T) {
	cases := []struct {
		name       string
		finalizers []string
		listed     bool
		want       bool
	}{
		{"tracking finalizer on", []string{batchv1.JobTrackingFinalizer}, false, true},
		{"in uncountedTerminatedPods", nil, true, true},
		{"counted: neither", nil, false, false},
		{"only someone else's finalizer", []string{"example.com/keep"}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := job("j")
			p := pod("p", corev1.PodSucceeded, j.UID, "0")
			p.Finalizers = tc.finalizers
			if tc.listed {
				j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p"}}
			}
			got := SuccessfulAttempts(j, []corev1.Pod{p})
			if len(got) != 1 || got[0].Uncounted != tc.want {
				t.Errorf("attempts %+v; want one with Uncounted %v", got, tc.want)
			}
		})
	}
}

// TestSucceededPodsFromMetadata: the metadata of a succeeded pod (all the coverage cache
// holds) counts as the same attempt as the whole pod, finalizer included.
func TestSucceededPodsFromMetadata(t *testing.T) {
	j := job("j")
	m := PodMetadata()
	m.ObjectMeta = pod("p", corev1.PodSucceeded, j.UID, "3").ObjectMeta
	m.Finalizers = []string{batchv1.JobTrackingFinalizer}
	got := SuccessfulAttempts(j, SucceededPods([]metav1.PartialObjectMetadata{*m}))
	want := []account.PodAttempt{{UID: "p", Index: 3, Uncounted: true}}
	if !slices.Equal(got, want) {
		t.Errorf("attempts %+v; want %+v", got, want)
	}
}
