package acceptance

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func terminated(msg string, exit int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: msg}}
}

// trainJob is the Job the pods of these tests belong to.
var trainJob = wrappers.MakeJob("train", "ns").Indexed(8).UID("job-uid").Obj()

// workerPod is the succeeded pod of index 7 of trainJob with a worker and a proxy
// container, its container statuses as given.
func workerPod(annotations map[string]string, statuses ...corev1.ContainerStatus) *corev1.Pod {
	p := wrappers.MakeIndexPod(trainJob, "job-1-abcde", 7).UID("pod-uid").Sidecar("proxy").
		Phase(corev1.PodSucceeded).ContainerStatuses(statuses...)
	for k, v := range annotations {
		p.Annotation(k, v)
	}
	return p.Obj()
}

// sidecarPod is a succeeded pod whose spec lists worker first, with a native sidecar
// (an init container with restartPolicy Always) "envoy"; statuses come as given.
func sidecarPod(statuses []corev1.ContainerStatus, initStatuses ...corev1.ContainerStatus) *corev1.Pod {
	p := workerPod(nil, statuses...)
	p.Spec.InitContainers = []corev1.Container{{Name: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	p.Status.InitContainerStatuses = initStatuses
	return p
}

// TestMessageOf reads the result container's message whatever order the statuses come in:
// a real kubelet sorts container statuses by name (kwok keeps spec order), so a sidecar
// whose name sorts first must never be read instead of the worker.
func TestMessageOf(t *testing.T) {
	named := map[string]string{v1alpha1.AnnotationResultContainer: "proxy"}
	defaultProxy := map[string]string{DefaultContainerAnnotation: "proxy"}
	proxyFirst := []corev1.ContainerStatus{ // kubelet order: sorted by name
		{Name: "proxy", State: terminated("envoy: shutting down", 0)},
		{Name: "worker", State: terminated("worker says", 0)},
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		account string // spec.acceptance.resultContainer
		want    string
		wantOK  bool
	}{
		{"first container of the spec, statuses in kubelet order", workerPod(nil, proxyFirst...), "", "worker says", true},
		{"first container of the spec, statuses in spec order", workerPod(nil, proxyFirst[1], proxyFirst[0]), "", "worker says", true},
		{"the account names the container", workerPod(nil, proxyFirst...), "proxy", "envoy: shutting down", true},
		{"annotation names the container", workerPod(named,
			corev1.ContainerStatus{Name: "worker", State: terminated("worker says", 0)},
			corev1.ContainerStatus{Name: "proxy", State: terminated("proxy says", 0)}), "", "proxy says", true},
		// The account's container is part of what judges its results: a pod template's
		// annotations are anyone's to edit who may update a queued Job.
		{"the account wins over the annotation", workerPod(named, proxyFirst...), "worker", "worker says", true},
		{"default-container annotation names the container", workerPod(defaultProxy, proxyFirst...), "", "envoy: shutting down", true},
		{"the account wins over default-container", workerPod(defaultProxy, proxyFirst...), "worker", "worker says", true},
		{"result-container wins over default-container", workerPod(map[string]string{v1alpha1.AnnotationResultContainer: "worker", DefaultContainerAnnotation: "proxy"}, proxyFirst...), "", "worker says", true},
		{"annotation names a missing container", workerPod(map[string]string{v1alpha1.AnnotationResultContainer: "nope"},
			corev1.ContainerStatus{Name: "worker", State: terminated("worker says", 0)}), "", "", false},
		{"native sidecar sorts first: the worker is read", sidecarPod(proxyFirst[1:],
			corev1.ContainerStatus{Name: "envoy", State: terminated("envoy: bye", 0)}), "", "worker says", true},
		{"the account names the native sidecar", sidecarPod(proxyFirst[1:],
			corev1.ContainerStatus{Name: "envoy", State: terminated("envoy: bye", 0)}), "envoy", "envoy: bye", true},
		{"a run-to-completion init container is never read", func() *corev1.Pod {
			p := sidecarPod(proxyFirst[1:], corev1.ContainerStatus{Name: "setup", State: terminated("setup: done", 0)})
			p.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
			return p
		}(), "setup", "", false},
		{"lastTerminationState fallback", workerPod(nil,
			corev1.ContainerStatus{Name: "worker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}, LastTerminationState: terminated("earlier run", 0)}), "", "earlier run", true},
		{"no fallback to a failed attempt", workerPod(nil,
			corev1.ContainerStatus{Name: "worker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}, LastTerminationState: terminated("crashed", 1)}), "", "", false},
		{"current state wins over the last one", workerPod(nil,
			corev1.ContainerStatus{Name: "worker", State: terminated("", 0), LastTerminationState: terminated("earlier run", 0)}), "", "", false},
		{"no message", workerPod(nil, corev1.ContainerStatus{Name: "worker", State: terminated("", 0)}), "", "", false},
		{"not terminated", workerPod(nil, corev1.ContainerStatus{Name: "worker", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), "", "", false},
		{"no statuses", workerPod(nil), "", "", false},
		{"spec stripped: no guess from the first status", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "w", State: terminated("m", 0)}}}}, "", "", false},
		{"spec stripped, the account names it", &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "w", State: terminated("m", 0)}}}}, "w", "m", true},
		{"no containers at all", &corev1.Pod{}, "", "", false},
		{"nil pod", nil, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := MessageOf(tc.pod, ResultContainer(tc.pod, tc.account))
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("MessageOf = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestFromPod(t *testing.T) {
	seed, err := Compile(seedRule)
	if err != nil {
		t.Fatal(err)
	}
	msg := func(shard string, records, valid int64) string {
		s, err := result.Encode(result.Report{Shard: shard, InputRevision: "in-1", ModelRevision: "m-3", Digest: "sha256:ab", Records: records, Valid: valid})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	withMessage := func(m string) *corev1.Pod {
		return workerPod(nil, corev1.ContainerStatus{Name: "worker", State: terminated(m, 0)})
	}
	// Every result records the rule it was judged under and the container it was read
	// from (here the default); with no criterion, the empty rule.
	identity := account.Result{Target: "job/ns/train", JobUID: "job-uid", Index: 7, Pod: "job-1-abcde", PodUID: "pod-uid",
		RuleDigest: v1alpha1.ResultDigest(seedRule, "")}
	noRule := func(r account.Result) account.Result {
		r.RuleDigest = v1alpha1.ResultDigest("", "")
		return r
	}
	claim := func(r account.Result, shard string, counts ...int64) account.Result {
		r.Shard, r.InputRevision, r.ModelRevision, r.Digest = shard, "in-1", "m-3", "sha256:ab"
		if len(counts) == 2 {
			r.Records, r.Valid = counts[0], counts[1]
		}
		return r
	}
	rejected := func(r account.Result, reason string) account.Result {
		r.RejectReason = reason
		return r
	}
	running := withMessage(msg("part-7", 5, 5))
	running.Status.Phase = corev1.PodRunning

	tests := []struct {
		name string
		pod  *corev1.Pod
		crit *Criterion
		want account.Result
		say  string // in RejectMessage
	}{
		{"good result", withMessage(msg("part-7", 5, 5)), seed, claim(identity, "part-7", 5, 5), ""},
		{"good result, no criterion", withMessage(msg("part-7", 0, 0)), nil, noRule(claim(identity, "part-7")), ""},
		// The claim passes through: the account core judges it against the assignment.
		{"forged shard passes the claim through", withMessage(msg("part-8", 5, 5)), seed, claim(identity, "part-8", 5, 5), ""},
		{"malformed message", withMessage(`{"version":"batchledger.dev/v1",`), seed, rejected(identity, result.ReasonMalformed), `container "worker": the JSON ends`},
		{"missing field keeps the claim read so far", withMessage(`{"version":"batchledger.dev/v1","shard":"part-7","inputRevision":"in-1","modelRevision":"m-3"}`), seed,
			func() account.Result {
				r := rejected(claim(identity, "part-7"), result.ReasonMissingField)
				r.Digest = ""
				return r
			}(), `"digest"`},
		{"criterion not met", withMessage(msg("part-7", 5, 4)), seed, rejected(claim(identity, "part-7", 5, 4), v1alpha1.RejectionCriterionNotMet), seedRule},
		{"no message", withMessage(""), seed, rejected(identity, result.ReasonMissing), `container "worker" has no termination message`},
		{"pod not succeeded", running, seed, rejected(identity, result.ReasonMissing), "Running, not Succeeded"},
		{"nil pod", nil, seed, func() account.Result {
			r := rejected(identity, result.ReasonMissing)
			r.Pod, r.PodUID = "", ""
			return r
		}(), "no pod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FromPod("job/ns/train", "job-uid", 7, tc.pod, "", tc.crit)
			if got.RejectMessage == "" && got.RejectReason != "" || got.RejectReason == "" && got.RejectMessage != "" {
				t.Fatalf("reason and message must come together: %+v", got)
			}
			if !strings.Contains(got.RejectMessage, tc.say) {
				t.Errorf("RejectMessage %q does not say %q", got.RejectMessage, tc.say)
			}
			got.RejectMessage = ""
			if got != tc.want {
				t.Errorf("FromPod =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// TestFromPodThroughAccount feeds FromPod's results to the account core: the good one is
// accepted, the forged claim and the malformed one are rejected and recorded.
func TestFromPodThroughAccount(t *testing.T) {
	spec := &v1alpha1.BatchAccountSpec{
		InputRevision: "in-1", ModelRevision: "m-3",
		Shards:      v1alpha1.ShardPopulation{Names: []string{"A", "B", "C"}},
		Assignments: []v1alpha1.Assignment{{Target: v1alpha1.TargetRef{Job: "j"}, Indexes: "0-2", Shards: []string{"A", "B", "C"}}},
		Acceptance:  &v1alpha1.AcceptanceCriterion{RequireResults: true, Rule: seedRule},
	}
	crit, err := NewCache(0).Get(spec.Acceptance.Rule)
	if err != nil {
		t.Fatal(err)
	}
	job := wrappers.MakeJob("j", "ns").Indexed(3).UID("uid-j").Completed("0-2", 3).Obj()
	pod := func(name string, idx int, m string) *corev1.Pod {
		return wrappers.MakeIndexPod(job, name, idx).UID(name).Succeeded(time.Now(), m).Obj()
	}
	enc := func(shard string) string {
		s, err := result.Encode(result.Report{Shard: shard, InputRevision: "in-1", ModelRevision: "m-3", Digest: "sha256:" + shard, Records: 3, Valid: 3})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	results := []account.Result{
		FromPod("job/j", "uid-j", 0, pod("p0", 0, enc("A")), "", crit),
		FromPod("job/j", "uid-j", 1, pod("p1", 1, enc("A")), "", crit), // index 1 is assigned B
		FromPod("job/j", "uid-j", 2, pod("p2", 2, "{"), "", crit),
	}
	out := account.Compute(account.Input{Namespace: "ns", Generation: 1, Spec: spec,
		Observations: map[string]account.Observation{"job/j": {Job: jobkind.Facts(job), SuccessfulPods: []account.PodAttempt{{UID: "p0", Index: 0}, {UID: "p1", Index: 1}, {UID: "p2", Index: 2}}}},
		Results:      results, Now: metav1.Now()})
	rs := out.Status.Results
	if rs.Rejected != 2 || len(rs.Rejections) != 2 {
		t.Fatalf("results summary = %+v; want 2 rejections", rs)
	}
	if r := rs.Rejections[0]; r.Pod != "p1" || r.Reason != v1alpha1.RejectionForgedClaim || r.Shard != "A" {
		t.Errorf("first rejection = %+v; want p1 ForgedClaim of shard A", r)
	}
	if r := rs.Rejections[1]; r.Pod != "p2" || r.Reason != result.ReasonMalformed {
		t.Errorf("second rejection = %+v; want p2 Malformed", r)
	}
}

func workerStatus(msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "worker", State: terminated(msg, 0)}
}
