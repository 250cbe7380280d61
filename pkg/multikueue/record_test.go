package multikueue

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
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
	for name, tc := range map[string]struct {
		pod             *corev1.Pod
		resultContainer string
	}{
		"the first container":   {pod: wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, ok).Obj()},
		"no message":            {pod: wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, "").Obj()},
		"not a result":          {pod: wrappers.MakeIndexPod(job, "p", 3).Succeeded(at, "done").Obj()},
		"status order by name":  {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Succeeded(at, "").ContainerStatuses(proxyStatus("x"), workerStatus(ok)).Obj()},
		"account names sidecar": {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Succeeded(at, "").ContainerStatuses(proxyStatus(ok), workerStatus("x")).Obj(), resultContainer: "proxy"},
		"pod annotation wins": {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Annotation(v1alpha1.AnnotationResultContainer, "proxy").
			Succeeded(at, "").ContainerStatuses(proxyStatus(ok), workerStatus("x")).Obj(), resultContainer: "worker"},
		"default container": {pod: wrappers.MakeIndexPod(job, "p", 3).Sidecar("proxy").Annotation(acceptance.DefaultContainerAnnotation, "proxy").
			Succeeded(at, "").ContainerStatuses(proxyStatus(ok), workerStatus("x")).Obj()},
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
		})
	}
}
