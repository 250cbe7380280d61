package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// A failing index of an Indexed Job with backoffLimitPerIndex shows up in failedIndexes,
// set by the real Job controller from the exit code the kubelet helper reports.
func TestFailingIndexShowsInFailedIndexes(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	job := wrappers.MakeJob("flaky", f.Namespace).Indexed(4).BackoffLimitPerIndex(0).Obj()
	f.Create(job)

	pod := framework.FinishIndexPod(t, job, 2, 3, "disk full")
	if got := pod.Status.ContainerStatuses[0].State.Terminated; got.Reason != "Error" || got.Message != "disk full" || pod.Status.Phase != corev1.PodFailed {
		t.Fatalf("failed pod reported phase %s, terminated %+v", pod.Status.Phase, got)
	}
	framework.WaitFor(t, job, framework.DefaultTimeout, `failedIndexes "2" while the other indexes run`, func(j *batchv1.Job) bool {
		return j.Status.FailedIndexes != nil && *j.Status.FailedIndexes == "2" && j.Status.Failed == 1
	})
	for _, i := range []int{0, 1, 3} {
		framework.FinishIndexPod(t, job, i, 0, "")
	}
	cond := framework.WaitForJobCondition(t, job, batchv1.JobFailed)
	if cond.Reason != batchv1.JobReasonFailedIndexes || job.Status.CompletedIndexes != "0,1,3" || *job.Status.FailedIndexes != "2" {
		t.Fatalf("Job failed with reason %q, completed %q, failed %v", cond.Reason, job.Status.CompletedIndexes, *job.Status.FailedIndexes)
	}
}

// The seed's backoffLimitPerIndex Job: an index is retried at most twice (three pods), and
// more than maxFailedIndexes (5) failed indexes fail the whole Job.
func TestSeedBackoffLimitPerIndexJob(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	job := framework.LoadObject[*batchv1.Job](t, "testdata/backoff-limit-per-index-job.yaml", f.Namespace)
	f.Create(job)

	failing := []int{0, 1, 2, 3, 4, 5}
	for attempt := range 3 {
		// The Job controller recreates a failed index after a per-index backoff (10s, then
		// 20s), so each round waits for the new pods.
		for _, i := range failing {
			framework.FinishIndexPod(t, job, i, 1, fmt.Sprintf("attempt %d failed", attempt))
		}
		if attempt < 2 {
			// Wait until the Job controller has counted this round's failures (it writes
			// failed and failedIndexes together): only then does an empty failedIndexes
			// say that no index has failed for good yet.
			want := int32(len(failing) * (attempt + 1))
			framework.WaitFor(t, job, framework.DefaultTimeout, fmt.Sprintf("%d failed pods counted", want), func(j *batchv1.Job) bool {
				return j.Status.Failed >= want
			})
			if job.Status.Failed != want || (job.Status.FailedIndexes != nil && *job.Status.FailedIndexes != "") {
				t.Fatalf("after %d failures of each index: failed %d, failedIndexes %v; want %d and none (backoffLimitPerIndex is 2)",
					attempt+1, job.Status.Failed, ptr.Deref(job.Status.FailedIndexes, ""), want)
			}
		}
	}
	cond := framework.WaitForJobCondition(t, job, batchv1.JobFailed)
	if cond.Reason != batchv1.JobReasonMaxFailedIndexesExceeded || *job.Status.FailedIndexes != "0-5" {
		t.Fatalf("Job failed with reason %q and failedIndexes %v, want MaxFailedIndexesExceeded and 0-5", cond.Reason, *job.Status.FailedIndexes)
	}
	perIndex := map[int]int{}
	for _, p := range framework.JobPods(t, job) {
		if p.Status.Phase == corev1.PodFailed && framework.TerminatedExitCode(&p) == 1 {
			perIndex[framework.PodIndex(&p)]++
		}
	}
	for _, i := range failing {
		if perIndex[i] != 3 {
			t.Errorf("index %d ran %d failing pods, want 3 (one run and two retries)", i, perIndex[i])
		}
	}
}

// The seed's successPolicy Job succeeds as soon as index 0 (the leader) succeeds, or when
// any six indexes did; the Job controller then stops the other pods.
func TestSeedSuccessPolicyJob(t *testing.T) {
	t.Parallel()
	f := framework.New(t)

	leader := framework.LoadObject[*batchv1.Job](t, "testdata/success-policy-job.yaml", f.Namespace)
	f.Create(leader)
	framework.RunningPods(t, leader, 8)
	framework.FinishIndexPod(t, leader, 0, 0, "")
	expectSuccessByPolicy(t, leader, "0", 1)

	anySix := framework.LoadObject[*batchv1.Job](t, "testdata/success-policy-job.yaml", f.Namespace)
	anySix.Name = "any-six"
	f.Create(anySix)
	framework.RunningPods(t, anySix, 8)
	for i := 1; i <= 6; i++ {
		framework.FinishIndexPod(t, anySix, i, 0, "")
	}
	expectSuccessByPolicy(t, anySix, "1-6", 6)
}

func expectSuccessByPolicy(t *testing.T, job *batchv1.Job, completed string, succeeded int32) {
	t.Helper()
	framework.WaitFor(t, job, framework.DefaultTimeout, "Complete with no pod left running", func(j *batchv1.Job) bool {
		return framework.JobConditionTrue(j, batchv1.JobComplete) && j.Status.Active == 0
	})
	met := framework.JobCondition(job, batchv1.JobSuccessCriteriaMet)
	if met == nil || met.Reason != batchv1.JobReasonSuccessPolicy {
		t.Fatalf("SuccessCriteriaMet = %+v, want reason %s", met, batchv1.JobReasonSuccessPolicy)
	}
	if job.Status.CompletedIndexes != completed || job.Status.Succeeded != succeeded {
		t.Fatalf("completedIndexes %q succeeded %d, want %q and %d", job.Status.CompletedIndexes, job.Status.Succeeded, completed, succeeded)
	}
}

// The seed's `trainer` Job with its headless Service: each pod is reachable as
// trainer-<index>.trainer (the Service publishes the pods' hostnames) and gets its RANK from
// the completion index.
func TestSeedTrainerJobWithHeadlessService(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	var job *batchv1.Job
	for _, obj := range framework.LoadObjects(t, "testdata/trainer-headless.yaml", f.Namespace) {
		f.Create(obj)
		if j, ok := obj.(*batchv1.Job); ok {
			job = j
		}
	}
	for _, p := range framework.RunningPods(t, job, 4) {
		i := framework.PodIndex(&p)
		if p.Spec.Hostname != fmt.Sprintf("trainer-%d", i) || p.Spec.Subdomain != "trainer" {
			t.Fatalf("pod %s: hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] != fmt.Sprint(i) {
			t.Fatalf("pod %s: RANK source annotation = %q", p.Name, p.Annotations[batchv1.JobCompletionIndexAnnotation])
		}
	}
	want := []string{"trainer-0", "trainer-1", "trainer-2", "trainer-3"}
	framework.Eventually(t, framework.DefaultTimeout, "EndpointSlices of Service trainer to publish "+fmt.Sprint(want), func() (bool, string, error) {
		var slices_ discoveryv1.EndpointSliceList
		if err := f.Client.List(f.Ctx, &slices_, client.InNamespace(f.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: "trainer"}); err != nil {
			return false, "", err
		}
		var got []string
		for _, s := range slices_.Items {
			for _, e := range s.Endpoints {
				if e.Hostname != nil && e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, *e.Hostname)
				}
			}
		}
		slices.Sort(got)
		return slices.Equal(got, want), fmt.Sprintf("ready hostnames %v", got), nil
	})
	for i := range 4 {
		framework.FinishIndexPod(t, job, i, 0, "")
	}
	framework.WaitFor(t, job, framework.DefaultTimeout, `completedIndexes "0-3" and Complete`, func(j *batchv1.Job) bool {
		return j.Status.CompletedIndexes == "0-3" && framework.JobConditionTrue(j, batchv1.JobComplete)
	})
}

// The seed's `etl` Job: an ordinary failure counts against backoffLimit, a disruption
// (eviction) is ignored, and exit code 42 of container main fails the Job at once.
func TestSeedEtlPodFailurePolicy(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	job := framework.LoadObject[*batchv1.Job](t, "testdata/etl-job.yaml", f.Namespace)
	f.Create(job)
	pods := framework.RunningPods(t, job, 5)

	// An ordinary failure and an eviction together: after a pod failure the v1.35 Job
	// controller cannot write the Job's status until its pod-failure backoff (10s, doubling)
	// ends, so one wait covers both.
	framework.FinishPod(t, &pods[0], 1, "transient error")
	evicted := &pods[1]
	if err := f.Client.SubResource("eviction").Create(f.Ctx, evicted, &policyv1.Eviction{}); err != nil {
		t.Fatalf("evict pod %s: %v", evicted.Name, err)
	}
	// The evicted pod is gone once the Job controller has accounted for it and dropped its
	// finalizer; by then the Count rule has counted the other failure.
	framework.Eventually(t, framework.DefaultTimeout, "evicted pod "+evicted.Name+" removed and one failure counted", func() (bool, string, error) {
		p := &corev1.Pod{}
		err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(evicted), p)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		j := &batchv1.Job{}
		if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return false, "", err
		}
		state := fmt.Sprintf("Job failed=%d; evicted pod: %s", j.Status.Failed, framework.SummarizePods([]corev1.Pod{*p}))
		return apierrors.IsNotFound(err) && j.Status.Failed >= 1, state, nil
	})
	f.Get(job)
	if job.Status.Failed != 1 || framework.JobConditionTrue(job, batchv1.JobFailed) {
		t.Fatalf("want exactly the ordinary failure counted, the eviction ignored: failed=%d\n%s", job.Status.Failed, framework.StatusYAML(job))
	}

	framework.FinishPod(t, &pods[2], 42, "bug: unexpected schema")
	cond := framework.WaitForJobCondition(t, job, batchv1.JobFailed)
	if cond.Reason != batchv1.JobReasonPodFailurePolicy {
		t.Fatalf("Job failed with reason %q (%s), want %s", cond.Reason, cond.Message, batchv1.JobReasonPodFailurePolicy)
	}
	if !strings.Contains(cond.Message, "exit code 42 matching FailJob rule") {
		t.Fatalf("Failed condition message %q does not name exit code 42 and the FailJob rule", cond.Message)
	}
}

// Five successful attempts on indexes 0,1,1,2,2: the Job controller counts each index once
// (completedIndexes "0-2", succeeded 3) and still waits for index 3.
func TestFiveSuccessfulAttemptsOnThreeIndexes(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	job := wrappers.MakeJob("attempts", f.Namespace).Indexed(4).Obj()
	f.Create(job)
	framework.RunningPods(t, job, 4)
	for i := range 3 {
		framework.FinishIndexPod(t, job, i, 0, fmt.Sprintf(`{"shard":"S%d"}`, i))
	}
	framework.CopyIndexPodAsSucceeded(t, job, 1, `{"shard":"S1"}`)
	framework.CopyIndexPodAsSucceeded(t, job, 2, `{"shard":"S2"}`)

	framework.Eventually(t, framework.DefaultTimeout, "five successful pods on indexes 0,1,1,2,2, all counted", func() (bool, string, error) {
		var indexes []int
		pods := framework.JobPods(t, job)
		for _, p := range pods {
			if p.Status.Phase == corev1.PodSucceeded {
				if slices.Contains(p.Finalizers, framework.JobTrackingFinalizer) {
					return false, framework.SummarizePods(pods), nil
				}
				indexes = append(indexes, framework.PodIndex(&p))
			}
		}
		slices.Sort(indexes)
		return slices.Equal(indexes, []int{0, 1, 1, 2, 2}), framework.SummarizePods(pods), nil
	})
	framework.WaitFor(t, job, framework.DefaultTimeout, `completedIndexes "0-2", succeeded 3`, func(j *batchv1.Job) bool {
		return j.Status.CompletedIndexes == "0-2" && j.Status.Succeeded == 3 && noUncounted(j)
	})
	if framework.JobConditionTrue(job, batchv1.JobComplete) {
		t.Fatal("Job complete although index 3 never succeeded")
	}
	framework.FinishIndexPod(t, job, 3, 0, `{"shard":"S3"}`)
	framework.WaitFor(t, job, framework.DefaultTimeout, `Complete with "0-3", succeeded 4`, func(j *batchv1.Job) bool {
		return framework.JobConditionTrue(j, batchv1.JobComplete) && j.Status.CompletedIndexes == "0-3" && j.Status.Succeeded == 4
	})
}

// noUncounted reports that the Job controller has no terminated pods left to count.
func noUncounted(j *batchv1.Job) bool {
	u := j.Status.UncountedTerminatedPods
	return u == nil || len(u.Succeeded)+len(u.Failed) == 0
}
