package framework

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamespacePrefixIsAValidGenerateName(t *testing.T) {
	for _, name := range []string{
		"TestSeedQueueRunsIndexedTrainJobOnH100",
		"TestOverQuota/sub_test#01",
		"Test" + strings.Repeat("VeryLong", 20),
	} {
		p := namespacePrefix(name)
		// The API server appends five characters to a generateName.
		if errs := validation.IsDNS1123Label(p + "abcde"); len(errs) > 0 {
			t.Errorf("namespacePrefix(%q) = %q: %v", name, p, errs)
		}
	}
}

func TestPodIndex(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "7"}}}
	if got := PodIndex(p); got != 7 {
		t.Errorf("PodIndex = %d", got)
	}
	if got := PodIndex(&corev1.Pod{}); got != -1 {
		t.Errorf("PodIndex of a non-indexed pod = %d", got)
	}
}

func TestIsEmptyYAML(t *testing.T) {
	if !isEmptyYAML([]byte("# only a comment\n---\n\n")) {
		t.Error("comment-only document is not empty")
	}
	if isEmptyYAML([]byte("# c\nkind: Job\n")) {
		t.Error("document with content is empty")
	}
}

func TestSummarizePodsShowsWhatMatters(t *testing.T) {
	now := metav1.Now()
	pods := []corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &now, Finalizers: []string{JobTrackingFinalizer},
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "2"}},
		Spec: corev1.PodSpec{NodeName: "kwok-h100-0"},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 42}}}}},
	}}
	got := SummarizePods(pods)
	for _, want := range []string{"p index=2", "phase=Failed", "node=kwok-h100-0", "deleting", JobTrackingFinalizer, "exit=42"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
}
