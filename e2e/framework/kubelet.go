package framework

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/pkg/relations"
)

// The kubelet helpers play the part of the node agent for pods on the kwok nodes: pods run
// until a test finishes them, and only the pod (its annotations, or its status as a kubelet
// writes it) is touched — never the Job's status, which stays the real Job controller's.

// JobTrackingFinalizer is the finalizer with which the Job controller counts a pod exactly
// once before letting it go.
const JobTrackingFinalizer = kwok.JobTrackingFinalizer

// podFinished reports a pod in a terminal phase.
func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podActive is a pod the Job controller counts as running: not finished, not being deleted.
func podActive(p *corev1.Pod) bool { return !podFinished(p) && p.DeletionTimestamp == nil }

// PodIndex returns a pod's completion index (relations.CompletionIndex), or -1 for a pod
// of a non-Indexed Job.
func PodIndex(p *corev1.Pod) int {
	if i, ok := relations.CompletionIndex(p); ok {
		return i
	}
	return -1
}

// jobWithUID makes sure the Job's UID is known (a freshly built object has none).
func jobWithUID(t testing.TB, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	if job.UID != "" {
		return job
	}
	fresh := &batchv1.Job{}
	if err := env.client.Get(t.Context(), client.ObjectKeyFromObject(job), fresh); err != nil {
		t.Fatalf("get Job %s/%s: %v", job.Namespace, job.Name, err)
	}
	return fresh
}

// RunningIndexPod waits for the running pod of a completion index (Running on a node, not
// finished, not being deleted, not already told to finish) and returns it.
func RunningIndexPod(t testing.TB, job *batchv1.Job, index int) *corev1.Pod {
	t.Helper()
	job = jobWithUID(t, job)
	var found *corev1.Pod
	Eventually(t, DefaultTimeout, fmt.Sprintf("a Running pod of Job %s/%s index %d", job.Namespace, job.Name, index), func() (bool, string, error) {
		pods := JobPods(t, job)
		for i := range pods {
			p := &pods[i]
			if PodIndex(p) == index && podActive(p) && p.Status.Phase == corev1.PodRunning && p.Annotations[kwok.ExitCodeAnnotation] == "" {
				found = p
				return true, "", nil
			}
		}
		return false, SummarizePods(pods), nil
	})
	return found
}

// RunningPods waits until the Job has at least n Running pods, and until the Job
// controller has counted them as active and ready, and returns the running ones.
//
// The second wait matters to whatever the test does next. A pod finished while the Job
// controller still has a status write in flight can be seen by a sync that works from a
// stale Job; its status write then conflicts after the sync has already acted on pods. For
// a successPolicy Job this is fatal: the sync deletes the other pods for SuccessCriteriaMet,
// the write carrying that condition conflicts, and the next sync counts the deleted pods
// as failed and fails the Job for BackoffLimitExceeded (kube-controller-manager v1.35
// checks the backoff limit before the success policy). A real kubelet's pods are just as
// exposed, but a test should start from a settled Job.
func RunningPods(t testing.TB, job *batchv1.Job, n int) []corev1.Pod {
	t.Helper()
	job = jobWithUID(t, job)
	var running []corev1.Pod
	Eventually(t, DefaultTimeout, fmt.Sprintf("%d Running pods of Job %s/%s", n, job.Namespace, job.Name), func() (bool, string, error) {
		pods := JobPods(t, job)
		running = running[:0]
		for _, p := range pods {
			if podActive(&p) && p.Status.Phase == corev1.PodRunning && p.Annotations[kwok.ExitCodeAnnotation] == "" {
				running = append(running, p)
			}
		}
		return len(running) >= n, SummarizePods(pods), nil
	})
	counted := &batchv1.Job{}
	counted.Namespace, counted.Name = job.Namespace, job.Name
	WaitFor(t, counted, DefaultTimeout, fmt.Sprintf("status counting %d active and ready pods", n), func(j *batchv1.Job) bool {
		return j.Status.Active >= int32(n) && ptr.Deref(j.Status.Ready, 0) >= int32(n)
	})
	return running
}

// FinishIndexPod finishes the running pod of a completion index as its container would:
// with exitCode and message as the termination message (kwok's pod-finish stage writes the
// status: terminated, reason Completed/Error, phase Succeeded/Failed). It returns the pod
// once finished.
func FinishIndexPod(t testing.TB, job *batchv1.Job, index int, exitCode int32, message string) *corev1.Pod {
	t.Helper()
	return FinishPod(t, RunningIndexPod(t, job, index), exitCode, message)
}

// FinishPod finishes a Running pod on a kwok node with exitCode and message, and returns it
// once kwok has reported it finished.
func FinishPod(t testing.TB, pod *corev1.Pod, exitCode int32, message string) *corev1.Pod {
	t.Helper()
	if err := kwok.Finish(t.Context(), env.client, pod, exitCode, message); err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{}
	p.Namespace, p.Name = pod.Namespace, pod.Name
	WaitFor(t, p, DefaultTimeout, fmt.Sprintf("finished with exit code %d", exitCode), func(p *corev1.Pod) bool {
		return podFinished(p)
	})
	if got := TerminatedExitCode(p); got != exitCode {
		t.Fatalf("pod %s/%s finished with exit code %d, want %d", p.Namespace, p.Name, got, exitCode)
	}
	return p
}

// TerminatedExitCode is the exit code of the pod's first terminated container (-1 if none).
func TerminatedExitCode(p *corev1.Pod) int32 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return cs.State.Terminated.ExitCode
		}
	}
	return -1
}

// CopyIndexPodAsSucceeded adds one more successful attempt to a completion index: a pod with
// the labels, annotations, controller ownerReference and job-tracking finalizer of that
// index's latest pod, on the same node, marked Succeeded through the status subresource as
// a kubelet would (kwok is told to leave it alone). The real Job controller counts it, once
// per index — how the suite reproduces histories such as five successful attempts on
// indexes 0,1,1,2,2. It returns the new pod.
//
// The pod is created bare and only becomes the Job's (labels, ownerReference, finalizer)
// once it has Succeeded: the Job controller deletes an extra *running* pod of an index
// within milliseconds.
func CopyIndexPodAsSucceeded(t testing.TB, job *batchv1.Job, index int, message string) *corev1.Pod {
	t.Helper()
	job = jobWithUID(t, job)
	var src *corev1.Pod
	for _, p := range JobPods(t, job) {
		if PodIndex(&p) == index {
			src = p.DeepCopy()
		}
	}
	if src == nil {
		t.Fatalf("Job %s/%s has no pod of index %d to copy", job.Namespace, job.Name, index)
	}
	jobController, err := kwok.JobControllerClient(env.config)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := kwok.AddSucceededAttempt(t.Context(), env.client, jobController, src, message)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// SummarizePods renders pods one per line for failure messages.
func SummarizePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no pods"
	}
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s index=%d phase=%s node=%s", p.Name, PodIndex(&p), p.Status.Phase, p.Spec.NodeName)
		if p.DeletionTimestamp != nil {
			b.WriteString(" deleting")
		}
		if len(p.Finalizers) > 0 {
			fmt.Fprintf(&b, " finalizers=%v", p.Finalizers)
		}
		if code := TerminatedExitCode(&p); code >= 0 {
			fmt.Fprintf(&b, " exit=%d", code)
		}
		b.WriteString("\n")
	}
	return b.String()
}
