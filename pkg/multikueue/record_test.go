package multikueue

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/crdschema"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestRecordJudgedAsThePod: the manager judges a WorkerResult exactly as result capture
// judges the pod it records, whichever container reports the result and whatever the
// account names as resultContainer.
func TestRecordJudgedAsThePod(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	job := wrappers.MakeJob("j", "ns").Obj()
	ok := `{"version":"batchledger.dev/v1","shard":"shard-3","inputRevision":"in","modelRevision":"m","records":5,"valid":5}`
	proxyStatus := func(msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "proxy", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}
	}
	workerStatus := func(msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "worker", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}
	}
	crit, err := acceptance.Compile("result.valid == result.records")
	if err != nil {
		t.Fatal(err)
	}
	// withInit adds a run-to-completion init container that wrote msg: it ends before
	// the pod's work begins, so it reports no result, even when the account names it.
	withInit := func(w *wrappers.PodWrapper, msg string) *corev1.Pod {
		pod := w.Obj()
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "fetch", Image: "fetch"})
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses,
			corev1.ContainerStatus{Name: "fetch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}})
		return pod
	}
	for name, tc := range map[string]struct {
		pod             *corev1.Pod
		resultContainer string
	}{
		"the first container":   {pod: wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, ok).Obj()},
		"no message":            {pod: wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, "").Obj()},
		"not a result":          {pod: wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, "done").Obj()},
		"status order by name":  {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Succeeded(at, "").ContainerStatuses(proxyStatus("x"), workerStatus(ok)).Obj()},
		"account names sidecar": {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Succeeded(at, "").ContainerStatuses(proxyStatus(ok), workerStatus("x")).Obj(), resultContainer: "proxy"},
		"the account wins over the pod annotation": {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Annotation(v1alpha1.AnnotationResultContainer, "proxy").
			Succeeded(at, "").ContainerStatuses(proxyStatus(ok), workerStatus("x")).Obj(), resultContainer: "worker"},
		"default container": {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Annotation(acceptance.DefaultContainerAnnotation, "proxy").
			Succeeded(at, "").ContainerStatuses(proxyStatus(ok), workerStatus("x")).Obj()},
		"account names an init container": {pod: withInit(wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, ok), ok), resultContainer: "fetch"},
		"pod annotation names an init container": {pod: withInit(wrappers.MakeIndexPod(job, "p", 3).
			Annotation(v1alpha1.AnnotationResultContainer, "fetch").Succeeded(at, ok), ok)},
		"default container is an init container": {pod: withInit(wrappers.MakeIndexPod(job, "p", 3).
			Annotation(acceptance.DefaultContainerAnnotation, "fetch").Succeeded(at, ok), "")},
		"an init container beside the worker": {pod: withInit(wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, ok), ok)},
	} {
		t.Run(name, func(t *testing.T) {
			rec := NewRecord(tc.pod, "job-j-d41e5", "j", 3, at)
			if rec.Name != string(tc.pod.UID) || rec.Workload != "job-j-d41e5" || rec.Index != 3 || rec.JobUID != job.UID || !rec.FinishedAt.Time.Equal(at) {
				t.Fatalf("record identity = %+v", rec)
			}
			want := acceptance.FromPod("job/j", "manager-uid", 3, tc.pod, tc.resultContainer, crit)
			got := acceptance.FromPod("job/j", "manager-uid", 3, RecordPod(rec), tc.resultContainer, crit)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("judged from the record:\n%+v\nfrom the pod:\n%+v", got, want)
			}
			// An API server with an earlier CRD prunes the init flag, and an earlier
			// manager ignores it: an init container is then a regular one without a
			// message, judged the same.
			pruned := rec.DeepCopy()
			for i := range pruned.Containers {
				pruned.Containers[i].Init = false
			}
			if got := acceptance.FromPod("job/j", "manager-uid", 3, RecordPod(pruned), tc.resultContainer, crit); !reflect.DeepEqual(got, want) {
				t.Errorf("judged from the record without init flags:\n%+v\nfrom the pod:\n%+v", got, want)
			}
		})
	}
}

// manyContainers is a succeeded pod of job with containers regular containers and
// sidecars native sidecars, each named by a label of nameLen characters: the first and
// the last report ok, the others a message of msgLen bytes.
func manyContainers(job *batchv1.Job, at time.Time, containers, sidecars, nameLen, msgLen int, ok string) *corev1.Pod {
	pod := wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, ok).Obj()
	name := func(i int) string {
		n := fmt.Sprintf("c%d-", i)
		return n + strings.Repeat("x", nameLen-len(n))
	}
	status := func(name, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg, FinishedAt: metav1.NewTime(at)}}}
	}
	pod.Spec.Containers[0].Name, pod.Status.ContainerStatuses[0].Name = name(0), name(0)
	always := corev1.ContainerRestartPolicyAlways
	for i := 1; i < containers+sidecars; i++ {
		msg := strings.Repeat("m", msgLen)
		if i == containers+sidecars-1 {
			msg = ok
		}
		if i < containers {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name(i), Image: "sidecar"})
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, status(name(i), msg))
			continue
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: name(i), Image: "sidecar", RestartPolicy: &always})
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, status(name(i), msg))
	}
	return pod
}

// TestRecordOfManyContainers: Kubernetes bounds a pod's containers by no count, so the
// CRD admits the record of a pod of any number of containers and native sidecars, and
// the manager judges it as the pod, whichever container the account names.
func TestRecordOfManyContainers(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	job := wrappers.MakeJob("j", "ns").Obj()
	ok := `{"version":"batchledger.dev/v1","shard":"shard-3","inputRevision":"in","modelRevision":"m","records":5,"valid":5}`
	sv := crdschema.Validator(t, "batchledger.dev_workerresults.yaml")
	validate := func(obj map[string]any) field.ErrorList { return validation.ValidateCustomResource(nil, obj, sv) }
	for name, tc := range map[string]struct {
		containers, sidecars, nameLen, msgLen int
	}{
		"one container": {containers: 1, nameLen: 8},
		// The kubelet shares 12 KiB of termination messages among a pod's containers.
		"64 containers and a native sidecar": {containers: 64, sidecars: 1, nameLen: 8, msgLen: 180},
		"65 containers":                      {containers: 65, nameLen: 8, msgLen: 180},
		"thousands of the longest names":     {containers: 4000, sidecars: 96, nameLen: 63, msgLen: 2},
	} {
		t.Run(name, func(t *testing.T) {
			pod := manyContainers(job, at, tc.containers, tc.sidecars, tc.nameLen, tc.msgLen, ok)
			rec := NewRecord(pod, "job-j-d41e5", "j", 3, at)
			rec.APIVersion, rec.Kind = v1alpha1.GroupVersion.String(), "WorkerResult"
			if n := len(rec.Containers); n != tc.containers+tc.sidecars {
				t.Fatalf("recorded %d containers, want %d", n, tc.containers+tc.sidecars)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := utiljson.Unmarshal(b, &obj); err != nil {
				t.Fatal(err)
			}
			if errs := validate(obj); len(errs) > 0 {
				t.Fatalf("the CRD refuses the record: %v", errs.ToAggregate())
			}
			last := rec.Containers[len(rec.Containers)-1].Name
			for _, named := range []string{"", last} {
				want := acceptance.FromPod("job/j", "manager-uid", 3, pod, named, nil)
				got := acceptance.FromPod("job/j", "manager-uid", 3, RecordPod(rec), named, nil)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("resultContainer %q: judged from the record:\n%+v\nfrom the pod:\n%+v", named, got, want)
				}
			}
		})
	}
}
