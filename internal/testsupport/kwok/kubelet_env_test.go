package kwok

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestContainerEnvResolvesTheDownwardAPI(t *testing.T) {
	ref := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
			Annotations: map[string]string{"batchledger.dev/shard": "D"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{
			{Name: "PLAIN", Value: "v"},
			{Name: "INDEX", ValueFrom: ref("metadata.labels['batch.kubernetes.io/job-completion-index']")},
			{Name: "SHARD", ValueFrom: ref("metadata.annotations['batchledger.dev/shard']")},
			{Name: "MISSING", ValueFrom: ref("metadata.annotations['absent']")},
		}}}},
	}
	want := map[string]string{"PLAIN": "v", "INDEX": "3", "SHARD": "D", "MISSING": ""}
	if got := ContainerEnv(pod); !maps.Equal(got, want) {
		t.Errorf("ContainerEnv = %v, want %v", got, want)
	}
	if got := ContainerEnv(&corev1.Pod{}); len(got) != 0 {
		t.Errorf("a pod without containers has env %v", got)
	}
}
