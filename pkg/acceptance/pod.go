package acceptance

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
)

// DefaultContainerAnnotation is the ecosystem's convention for a pod's main container
// (kubectl logs and exec pick it; k8s.io/kubectl's podcmd.DefaultContainerAnnotationName,
// repeated here rather than linking kubectl for one string).
const DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// ResultContainer returns the name of the container that reports pod's result: named
// (the account's spec.acceptance.resultContainer, part of what judges its results, so no
// pod overrides it: anyone who may update a queued Job may edit its pod template's
// annotations), else the one v1alpha1.AnnotationResultContainer names, else the one
// DefaultContainerAnnotation names (a pod that tells kubectl which container is its own
// tells batchledger too), else the first container of the pod spec. It returns
// "" when the pod has no spec to tell: the order of container statuses is no substitute,
// since a real kubelet sorts them by name (an "istio-proxy" sidecar before "worker").
func ResultContainer(pod *corev1.Pod, named string) string {
	if pod == nil {
		return ""
	}
	if named != "" {
		return named
	}
	if name := pod.Annotations[v1alpha1.AnnotationResultContainer]; name != "" {
		return name
	}
	if name := pod.Annotations[DefaultContainerAnnotation]; name != "" {
		return name
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}

// MessageOf returns the termination message of the pod's container named container
// (a regular container or a native sidecar, i.e. an init container with restartPolicy
// Always) and whether there is one. It reads the container's current terminated state;
// only when the container has no current terminated state does it fall back to
// lastTerminationState, and then only to an attempt that exited 0: the message of an
// earlier failed attempt must not stand in for the run that succeeded.
func MessageOf(pod *corev1.Pod, container string) (string, bool) {
	if container == "" {
		return "", false
	}
	for _, group := range []struct {
		statuses []corev1.ContainerStatus
		init     bool
	}{{pod.Status.ContainerStatuses, false}, {pod.Status.InitContainerStatuses, true}} {
		for i := range group.statuses {
			cs := &group.statuses[i]
			if cs.Name != container {
				continue
			}
			if group.init && !nativeSidecar(pod, container) {
				// A run-to-completion init container ends before the pod's work begins.
				return "", false
			}
			if t := cs.State.Terminated; t != nil {
				return t.Message, t.Message != ""
			}
			if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode == 0 {
				return t.Message, t.Message != ""
			}
			return "", false
		}
	}
	return "", false
}

// NativeSidecar reports whether the init container c is a native sidecar (restartPolicy
// Always): it runs beside the pod's containers, so its message may report the pod's work.
func NativeSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// nativeSidecar reports whether pod's init container named name is a NativeSidecar.
func nativeSidecar(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			return NativeSidecar(c)
		}
	}
	return false
}

// FromPod turns pod's reported result into the account.Result the account core judges:
// it fills the completion identity (target, Job UID, index) and the pod, decodes the
// termination message, copies the claim (shard, revisions, digest) and evaluates crit
// (nil accepts every result). The message is read from the container ResultContainer
// names, given the account's resultContainer (empty: the first container). Any failure sets RejectReason and RejectMessage, and the
// claim is still filled as far as it was read, so the rejection is recorded against
// the shard the pod claimed. It does not check the claim against the assignment: the
// account core does, and rejects a forged shard there.
//
// Only a Succeeded pod's message counts as a result: a pod that failed or is still
// running has not completed its index, whatever it wrote.
func FromPod(target string, jobUID types.UID, index int, pod *corev1.Pod, resultContainer string, crit *Criterion) account.Result {
	// The digest covers the container as well as the rule: both decide the verdict.
	res := account.Result{Target: target, JobUID: jobUID, Index: index, RuleDigest: v1alpha1.ResultDigest(crit.Rule(), resultContainer)}
	reject := func(e *result.Error) account.Result {
		res.RejectReason, res.RejectMessage = e.Reason, e.Message
		return res
	}
	if pod == nil {
		return reject(rejectf(result.ReasonMissing, "no pod to read a result from"))
	}
	res.Pod, res.PodUID = pod.Name, pod.UID
	if pod.Status.Phase != corev1.PodSucceeded {
		return reject(rejectf(result.ReasonMissing, "the pod is %s, not Succeeded: only a succeeded pod reports a result", phaseOf(pod)))
	}
	container := ResultContainer(pod, resultContainer)
	msg, ok := MessageOf(pod, container)
	if !ok {
		if container == "" {
			return reject(rejectf(result.ReasonMissing, "the pod has no containers to read a result from"))
		}
		if !hasContainer(pod, container) {
			return reject(rejectf(result.ReasonMissing, "the pod has no container %q to read a result from: set spec.acceptance.resultContainer to the worker container", container))
		}
		return reject(rejectf(result.ReasonMissing, "container %q has no termination message: the worker must write its result (JSON, version %q) to /dev/termination-log", container, result.SchemaVersion))
	}
	r, derr := result.DecodePartial(msg)
	if r != nil {
		res.Shard, res.InputRevision, res.ModelRevision, res.Digest = r.Shard, r.InputRevision, r.ModelRevision, r.Digest
		res.Output, res.Records, res.Valid = r.Output, r.Records, r.Valid
	}
	if derr != nil {
		return reject(&result.Error{Reason: derr.Reason, Message: fmt.Sprintf("container %q: %s", container, derr.Message)})
	}
	if cerr := crit.Check(r); cerr != nil {
		return reject(cerr)
	}
	return res
}

func phaseOf(pod *corev1.Pod) string {
	if pod.Status.Phase == "" {
		return "in no phase yet"
	}
	return string(pod.Status.Phase)
}

// hasContainer is whether the pod reports a status for a container of that name.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, cs := range statuses {
			if cs.Name == name {
				return true
			}
		}
	}
	return false
}
