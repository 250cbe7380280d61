package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These are the kubelet's moves for pods on kwok nodes, shared by the e2e framework (which
// wraps them with waits and test failures) and the demo. They touch only pods — their
// annotations, or their status as a kubelet writes it — never a Job's status.

// JobTrackingFinalizer is the finalizer with which the Job controller counts a pod exactly
// once before letting it go.
const JobTrackingFinalizer = "batch.kubernetes.io/job-tracking"

// Finish tells the pod-finish stage to terminate a Running pod's containers with exitCode
// and message as the termination message, as a kubelet would report them.
func Finish(ctx context.Context, c client.Client, pod *corev1.Pod, exitCode int32, message string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		ExitCodeAnnotation:           strconv.Itoa(int(exitCode)),
		TerminationMessageAnnotation: message,
	}}})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate pod %s/%s to finish: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// AddSucceededAttempt adds one more successful attempt to src's completion index: a pod
// with src's labels, annotations, controller ownerReference and job-tracking finalizer, on
// the same node, marked Succeeded through the status subresource with message as its
// termination message. The real Job controller counts it, once per index.
//
// The pod is created bare and only becomes the Job's (labels, ownerReference, finalizer)
// once it has Succeeded: the Job controller deletes an extra *running* pod of an index
// within milliseconds. It is created and handed to the Job by jobController
// (JobControllerClient), as the Job controller creates and adopts every pod of a Job:
// only then may it carry the mark batchledger's pod webhooks put on src and be filed
// under src's Job (its index-pod admission policy), which the pod needs for its result
// to count.
func AddSucceededAttempt(ctx context.Context, c, jobController client.Client, src *corev1.Pod, message string) (*corev1.Pod, error) {
	ctrl := metav1.GetControllerOf(src)
	if ctrl == nil {
		return nil, fmt.Errorf("pod %s/%s has no controller reference", src.Namespace, src.Name)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: strings.TrimSuffix(src.GenerateName, "-") + "-",
			Namespace:    src.Namespace,
			Annotations:  map[string]string{UnmanagedAnnotation: "true"},
		},
		Spec: *src.Spec.DeepCopy(),
	}
	if pod.GenerateName == "-" {
		pod.GenerateName = src.Name + "-"
	}
	for k, v := range src.Annotations {
		if !strings.HasPrefix(k, "kwok.batchledger.dev/") {
			pod.Annotations[k] = v
		}
	}
	dropServiceAccountToken(&pod.Spec)
	if err := jobController.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("create an extra pod like %s/%s: %w", src.Namespace, src.Name, err)
	}
	now := metav1.NewTime(time.Now())
	pod.Status = corev1.PodStatus{
		Phase:     corev1.PodSucceeded,
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
		},
	}
	for _, ct := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:  ct.Name,
			Image: ct.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", Message: message, StartedAt: now, FinishedAt: now,
			}},
		})
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, fmt.Errorf("mark extra pod %s/%s Succeeded: %w", pod.Namespace, pod.Name, err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":          src.Labels,
		"ownerReferences": []metav1.OwnerReference{*ctrl},
		"finalizers":      []string{JobTrackingFinalizer},
	}})
	if err := jobController.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("hand extra pod %s/%s to %s %s: %w", pod.Namespace, pod.Name, ctrl.Kind, ctrl.Name, err)
	}
	return pod, nil
}

// dropServiceAccountToken removes the token volume admission added to the source pod; the
// ServiceAccount admission plugin adds a fresh one to the copy.
func dropServiceAccountToken(spec *corev1.PodSpec) {
	const prefix = "kube-api-access-"
	var vols []corev1.Volume
	for _, v := range spec.Volumes {
		if !strings.HasPrefix(v.Name, prefix) {
			vols = append(vols, v)
		}
	}
	spec.Volumes = vols
	for i := range spec.Containers {
		var mounts []corev1.VolumeMount
		for _, m := range spec.Containers[i].VolumeMounts {
			if !strings.HasPrefix(m.Name, prefix) {
				mounts = append(mounts, m)
			}
		}
		spec.Containers[i].VolumeMounts = mounts
	}
}

// ContainerEnv is the environment a kubelet gives the pod's first container: plain values,
// and the downward-API references to the pod's labels and annotations resolved (such as
// the completion index the Job controller sets, or the shard batchledger annotates).
func ContainerEnv(pod *corev1.Pod) map[string]string {
	env := map[string]string{}
	if len(pod.Spec.Containers) == 0 {
		return env
	}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			continue
		}
		path := e.ValueFrom.FieldRef.FieldPath
		if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
			env[e.Name] = pod.Labels[strings.TrimSuffix(key, "']")]
		} else if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
			env[e.Name] = pod.Annotations[strings.TrimSuffix(key, "']")]
		}
	}
	return env
}

// JobControllerClient is a client of cfg's API server acting as Kubernetes' Job controller
// (its ServiceAccount, kubectl --as), for a test to create a pod as that controller would
// (AddSucceededAttempt). cfg's user must be allowed to impersonate (a cluster admin).
func JobControllerClient(cfg *rest.Config) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:job-controller",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	return client.New(cfg, client.Options{})
}
