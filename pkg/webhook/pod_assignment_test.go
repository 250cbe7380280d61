package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// admitPod admits pod through h, which must allow it, and returns the pod as the API
// server stores it after the response's patch, and the response.
func admitPod(t *testing.T, h admission.Handler, pod *corev1.Pod) (corev1.Pod, admission.Response) {
	t.Helper()
	return admitPodAs(t, h, pod, "")
}

// admitPodAs is admitPod for a pod that user creates.
func admitPodAs(t *testing.T, h admission.Handler, pod *corev1.Pod, user string) (corev1.Pod, admission.Response) {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ml-team", Object: runtime.RawExtension{Raw: raw},
		UserInfo: authenticationv1.UserInfo{Username: user}}})
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	if len(resp.Patches) > 0 {
		b, _ := json.Marshal(resp.Patches)
		p, err := jsonpatch.DecodePatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = p.Apply(raw); err != nil {
			t.Fatal(err)
		}
	}
	var out corev1.Pod
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out, resp
}

// checkWarning fails unless the response warns exactly when want is set, with want in
// its text.
func checkWarning(t *testing.T, resp admission.Response, want string) {
	t.Helper()
	if got := strings.Join(resp.Warnings, "; "); !strings.Contains(got, want) || (want == "") != (got == "") {
		t.Errorf("warnings %q, want %q", got, want)
	}
}

// told is the annotations a pod of index idx gets: the completion index the Job
// controller set and the assignment.
func told(idx, shard, input, model, accounts string) map[string]string {
	return map[string]string{batchv1.JobCompletionIndexAnnotation: idx, v1alpha1.AnnotationShard: shard,
		v1alpha1.AnnotationInputRev: input, v1alpha1.AnnotationModelRev: model, v1alpha1.AnnotationAccount: accounts}
}

// TestPodAssignmentAnnotator: a new index pod is told the shard and revisions the account
// assigns its (Job, index), for repair Jobs and JobSet children too, from the short
// form when no account exists yet; it is told nothing when no one assigns it or the
// accounts disagree.
func TestPodAssignmentAnnotator(t *testing.T) {
	const ns = "ml-team"
	job := func(name string, n int32) *wrappers.JobWrapper {
		return wrappers.MakeJob(name, ns).Indexed(n).UID(name+"-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults)
	}
	pod := func(j *wrappers.JobWrapper, idx int) *corev1.Pod {
		return wrappers.MakeIndexPod(j.Obj(), j.Obj().Name+"-x", idx).NotByJobController().Obj()
	}
	ij245 := wrappers.MakeBatchAccount("ij245", ns).Shards("A", "B", "C", "D").AssignJob("ij245", "0-3", "A", "B", "C", "D").
		Repair("ij245-repair", "0-1", "B", "D").RequireResults("true").Obj()
	compact := wrappers.MakeBatchAccount("big", ns).ShardCount("part-", 100).Revisions("in-7", "m-9").AssignJobOrdinals("big", "0-99", "0-99").Obj()
	js := wrappers.MakeJobSet("train", ns).ReplicatedJob(jobsetapi.ReplicatedJob{Name: "workers", Replicas: 2,
		Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Completions: ptr.To(int32(2))}}}).Obj()
	childAccount := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 4).AssignJobSet("train", "workers", 0, "0-1", "0-1").
		AssignJobSet("train", "workers", 1, "0-1", "2-3").Obj()
	child := func(jobIndex int) *wrappers.JobWrapper {
		return job(jobsetkind.ChildJobName("train", "workers", jobIndex), 2).JobSetChild(js, "workers", jobIndex, 0)
	}
	shortJob := job("short", 3).AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m",
		v1alpha1.AnnotationShards, "X,Y,Z")
	shortJS := wrappers.MakeJobSet("sjs", ns).ReplicatedJob(jobsetapi.ReplicatedJob{Name: "w", Replicas: 2,
		Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Completions: ptr.To(int32(2))}}}).
		AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m", v1alpha1.AnnotationShardCount, "4",
			v1alpha1.AnnotationShardPrefix, "p-", v1alpha1.AnnotationReplicatedJob, "w").Obj()
	// One account that names child 0 twice, by its Job name and as the JobSet's child: the
	// webhook of the account's spec sees two targets, and only the Job shows they are one.
	twice := wrappers.MakeBatchAccount("twice", ns).ShardCount("s", 4).AssignJobOrdinals(jobsetkind.ChildJobName("train", "workers", 0), "0-1", "0-1").
		AssignJobSet("train", "workers", 0, "0-1", "2-3").Obj()
	agrees := wrappers.MakeBatchAccount("ij245-audit", ns).Shards("A", "B", "C", "D").AssignJob("ij245", "2", "C").Obj()
	differs := wrappers.MakeBatchAccount("other", ns).Shards("A", "B", "C", "D").AssignJob("ij245", "2", "D").Obj()
	deleting := wrappers.MakeBatchAccount("gone", ns).Shards("Q").AssignJob("lone", "0", "Q").Obj()
	deleting.DeletionTimestamp, deleting.Finalizers = ptr.To(metav1.Now()), []string{"keep"}
	// An Accepted account follows none but the Jobs on its record: one Accepted on an
	// earlier Job of the name assigns nothing to a re-run's pods (another batch's).
	acceptedOn := func(uid types.UID) *v1alpha1.BatchAccount {
		ba := wrappers.MakeBatchAccount("ij245-2025", ns).Generation(1).Shards("A", "B", "C", "D").Revisions("D-2025", "m-2025").
			AssignJob("ij245", "0-3", "A", "B", "C", "D").TargetStatus(v1alpha1.TargetStatus{Name: "job/ij245", Job: "ij245", UID: uid}).
			Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", time.Now()).Obj()
		ba.Status.ObservedGeneration = 1
		return ba
	}
	// The account of the short form's name that stands already: made from the short form
	// of a JobSet of that name, or Accepted on an earlier Job of the name. Neither assigns
	// the short-form Job's pods anything, and no other account of the name is coming.
	shortOfJobSet := wrappers.MakeBatchAccount("short", ns).Revisions("D", "m").ShardCount("", 4).
		AssignJobSet("short", "w", 0, "0-1", "0-1").AssignJobSet("short", "w", 1, "0-1", "2-3").
		Label(v1alpha1.LabelShortFormOf, "JobSet").Obj()
	shortAccepted := wrappers.MakeBatchAccount("short", ns).Generation(1).Revisions("D", "m").Shards("X", "Y", "Z").
		AssignJobOrdinals("short", "0-2", "0-2").Label(v1alpha1.LabelShortFormOf, "Job").
		TargetStatus(v1alpha1.TargetStatus{Name: "job/short", Job: "short", UID: "earlier-uid"}).
		Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", time.Now()).Obj()
	shortAccepted.Status.ObservedGeneration = 1
	shortDeleting := shortOfJobSet.DeepCopy()
	shortDeleting.DeletionTimestamp, shortDeleting.Finalizers = ptr.To(metav1.Now()), []string{"keep"}
	withTemplate := pod(job("ij245", 4), 1)
	withTemplate.Annotations[v1alpha1.AnnotationShard] = "hand-copied"
	// The API server labels a Job's pod template only when it generates the selector.
	manualSelector := pod(job("ij245", 4), 2)
	delete(manualSelector.Labels, batchv1.JobNameLabel)
	delete(manualSelector.Labels, batchv1.ControllerUidLabel)

	cases := []struct {
		name    string
		objs    []client.Object
		pod     *corev1.Pod
		want    map[string]string // the pod's annotations after admission
		warning string
	}{
		{"original index", []client.Object{ij245}, pod(job("ij245", 4), 2), told("2", "C", "D", "m-2026-11", "ij245"), ""},
		{"repair Job index", []client.Object{ij245}, pod(job("ij245-repair", 2), 1), told("1", "D", "D", "m-2026-11", "ij245"), ""},
		{"compact population", []client.Object{compact}, pod(job("big", 100), 42), told("42", "part-42", "in-7", "m-9", "big"), ""},
		{"JobSet child 1", []client.Object{childAccount, js}, pod(child(1), 1), told("1", "s3", "D", "m-2026-11", "train"), ""},
		{"the template's hand-copied shard is replaced", []client.Object{ij245}, withTemplate, told("1", "B", "D", "m-2026-11", "ij245"), ""},
		{"a Job with a manual selector: its pod has no job-name label", []client.Object{ij245}, manualSelector, told("2", "C", "D", "m-2026-11", "ij245"), ""},
		{"two accounts that agree", []client.Object{ij245, agrees}, pod(job("ij245", 4), 2), told("2", "C", "D", "m-2026-11", "ij245,ij245-audit"), ""},
		{"two accounts that disagree: not told", []client.Object{ij245, differs}, pod(job("ij245", 4), 2),
			map[string]string{batchv1.JobCompletionIndexAnnotation: "2"}, "accounts ij245, other assign its Job index differently"},
		{"one account that maps the index through two targets naming its Job: not told", []client.Object{twice, js}, pod(child(0), 1),
			map[string]string{batchv1.JobCompletionIndexAnnotation: "1"}, "account twice assigns its Job index through two targets that name its Job"},
		{"an account Accepted on an earlier Job of the name: the re-run's pod is told its own", []client.Object{ij245, acceptedOn("earlier-uid")},
			pod(job("ij245", 4), 2), told("2", "C", "D", "m-2026-11", "ij245"), ""},
		{"an account Accepted on this very Job still counts", []client.Object{ij245, acceptedOn("ij245-uid")}, pod(job("ij245", 4), 2),
			map[string]string{batchv1.JobCompletionIndexAnnotation: "2"}, "accounts ij245, ij245-2025 assign its Job index differently"},
		{"an index no account maps", []client.Object{ij245}, pod(job("ij245-repair", 2), 3) /* index beyond the repair */, map[string]string{batchv1.JobCompletionIndexAnnotation: "3"}, ""},
		{"no account, no short form", nil, pod(job("lone", 1), 0), map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}, ""},
		{"an account being deleted tells nothing", []client.Object{deleting}, pod(job("lone", 1), 0), map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}, ""},
		{"short-form Job before its account", []client.Object{shortJob.Obj()}, pod(shortJob, 2), told("2", "Z", "D", "m", "short"), ""},
		{"short-form Job under the name of a JobSet's short-form account: not told", []client.Object{shortJob.Obj(), shortOfJobSet}, pod(shortJob, 2),
			map[string]string{batchv1.JobCompletionIndexAnnotation: "2"}, ""},
		{"short-form Job re-run under the name of its Accepted account: not told", []client.Object{shortJob.Obj(), shortAccepted}, pod(shortJob, 2),
			map[string]string{batchv1.JobCompletionIndexAnnotation: "2"}, ""},
		{"short-form Job while an account of its name is being deleted: its own", []client.Object{shortJob.Obj(), shortDeleting}, pod(shortJob, 2),
			told("2", "Z", "D", "m", "short"), ""},
		{"short-form JobSet child before its account", []client.Object{shortJS},
			pod(job(jobsetkind.ChildJobName("sjs", "w", 1), 2).JobSetChild(shortJS, "w", 1, 0), 0), told("0", "p-2", "D", "m", "sjs"), ""},
		{"a pod no Job controls", []client.Object{ij245}, wrappers.MakePod("bare", ns).Obj(), nil, ""},
		// A pod with no controller whose index-pod mark names its Job is that Job's to
		// PodTargets; when no account assigns it, the Job its mark names is asked for a
		// short form (its creator's mark is taken off).
		{"an ownerless marked pod, no account, no short form", nil, wrappers.MakeIndexPod(job("lone", 1).Obj(), "lone-x", 0).NoOwner().Obj(),
			map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}, ""},
		{"an ownerless marked pod of a short-form Job", []client.Object{shortJob.Obj()}, wrappers.MakeIndexPod(shortJob.Obj(), "short-x", 2).NoOwner().Obj(),
			told("2", "Z", "D", "m", "short"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			after, resp := admitPod(t, PodAssignmentAnnotator{Reader: indexedReader(t, nil, tc.objs...)}, tc.pod)
			if d := cmp.Diff(tc.want, after.Annotations); d != "" {
				t.Errorf("annotations (-want +got):\n%s", d)
			}
			checkWarning(t, resp, tc.warning)
		})
	}
}

// TestPodAssignmentOfAnOrphanedIndexPod: a pod orphaned from its Job (no controller
// reference) whose index-pod mark names the Job is the Job's index pod to PodTargets;
// its assignment is the Job's, and is read without a controller reference.
func TestPodAssignmentOfAnOrphanedIndexPod(t *testing.T) {
	const ns = "ml-team"
	j := wrappers.MakeJob("ij245", ns).Indexed(4).UID("ij245-uid").Obj()
	ij245 := wrappers.MakeBatchAccount("ij245", ns).Shards("A", "B", "C", "D").AssignJob("ij245", "0-3", "A", "B", "C", "D").Obj()
	orphan := wrappers.MakeIndexPod(j, "ij245-2", 2).NoOwner().Obj()
	a, found, err := PodAssignment(context.Background(), indexedReader(t, nil, ij245), nil, orphan)
	if err != nil || !found || a.Shard != "C" {
		t.Errorf("PodAssignment = %+v, %v, %v; want shard C, found", a, found, err)
	}
}

// TestPodAssignmentAnnotatorFailsOpen: a failed account lookup admits the pod unchanged,
// with a warning and the unclassified metric.
func TestPodAssignmentAnnotatorFailsOpen(t *testing.T) {
	r := indexedReader(t, &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return errors.New("cache not synced")
	}})
	before := testutil.ToFloat64(unclassifiedObjects.WithLabelValues(PodAssignPath))
	p := wrappers.MakeIndexPod(wrappers.MakeJob("j", "ml-team").Indexed(1).Obj(), "j-0", 0).NotByJobController().Obj()
	raw, _ := json.Marshal(p)
	resp := admit(t, PodAssignmentAnnotator{Reader: r}, raw)
	if !resp.Allowed || len(resp.Patches) > 0 || len(resp.Warnings) == 0 || !strings.Contains(resp.Warnings[0], "cache not synced") {
		t.Errorf("response %+v, want allowed unchanged with a warning", resp)
	}
	if after := testutil.ToFloat64(unclassifiedObjects.WithLabelValues(PodAssignPath)); after != before+1 {
		t.Errorf("unclassified metric %v -> %v, want +1", before, after)
	}
}

// BenchmarkPodAssignment is the cost of compiling an account the webhook tells pods
// their shards from (once per spec: account.MappingCache) and mapping one pod through it: for
// explicit shard names it is linear in the names; compact populations cost nothing per
// shard. (The fake client copies objects, which the manager's cache does not, so the
// lookup is left out.)
func BenchmarkPodAssignment(b *testing.B) {
	const n = 10000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("part-%05d", i)
	}
	for _, bc := range []struct {
		name string
		ba   *v1alpha1.BatchAccount
	}{
		{"10000 names", wrappers.MakeBatchAccount("named", "ml-team").Shards(names...).AssignJob("j", "0-9999", names...).Obj()},
		{"100000 compact", wrappers.MakeBatchAccount("compact", "ml-team").ShardCount("p-", 100000).AssignJobOrdinals("j", "0-99999", "0-99999").Obj()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			keys := []v1alpha1.TargetKey{v1alpha1.JobTargetKey("j")}
			b.ReportAllocs()
			for b.Loop() {
				if a, ok := assignmentOf(bc.ba.Name, &bc.ba.Spec, account.Compile(bc.ba.Namespace, &bc.ba.Spec), keys, 4242); !ok || a.Shard == "" {
					b.Fatalf("%+v %v", a, ok)
				}
			}
		})
	}
}

// TestPodResultHolderAssigns: with Assign set, the pod webhook holds a results pod and
// tells it its assignment in one call, and the assignment keeps its own fail-open rule
// under the webhook's failurePolicy Fail: a lookup that fails, hangs or panics still
// leaves the pod held, only without its annotations and with a warning.
func TestPodResultHolderAssigns(t *testing.T) {
	const ns = "ml-team"
	ij245 := wrappers.MakeBatchAccount("ij245", ns).Shards("A", "B", "C", "D").AssignJob("ij245", "0-3", "A", "B", "C", "D").
		RequireResults("true").Obj()
	job := wrappers.MakeJob("ij245", ns).Indexed(4).UID("ij245-uid").PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj()
	pod := func(finalizers ...string) *corev1.Pod {
		return wrappers.MakeIndexPod(job, "ij245-2-x", 2).Finalizers(finalizers...).Obj()
	}
	hang := &interceptor.Funcs{List: func(ctx context.Context, _ client.WithWatch, _ client.ObjectList, _ ...client.ListOption) error {
		<-ctx.Done() // a cache that never syncs
		return ctx.Err()
	}}
	panics := &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		panic("index missing")
	}}
	fails := &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return errors.New("cache not synced")
	}}
	held := []string{v1alpha1.ResultFinalizer}
	untold := map[string]string{batchv1.JobCompletionIndexAnnotation: "2"}
	cases := []struct {
		name           string
		funcs          *interceptor.Funcs
		pod            *corev1.Pod
		wantFinalizers []string
		wantAnnots     map[string]string
		warning        string
	}{
		{"held and told in one call", nil, pod(), held, told("2", "C", "D", "m-2026-11", "ij245"), ""},
		{"already held: only told", nil, pod(v1alpha1.ResultFinalizer), held, told("2", "C", "D", "m-2026-11", "ij245"), ""},
		{"other finalizers kept", nil, pod("example.com/keep"), []string{"example.com/keep", v1alpha1.ResultFinalizer},
			told("2", "C", "D", "m-2026-11", "ij245"), ""},
		{"a failed lookup: held, not told", fails, pod(), held, untold, "cache not synced"},
		{"a lookup that outlasts the timeout: held, not told", hang, pod(), held, untold, "deadline exceeded"},
		{"a lookup that panics: held, not told", panics, pod(), held, untold, "index missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assign := PodAssignmentAnnotator{Reader: indexedReader(t, tc.funcs, ij245, job)}
			after, resp := admitPod(t, PodResultHolder{Assign: &assign, AssignTimeout: 50 * time.Millisecond}, tc.pod)
			if d := cmp.Diff(tc.wantFinalizers, after.Finalizers); d != "" {
				t.Errorf("finalizers (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantAnnots, after.Annotations); d != "" {
				t.Errorf("annotations (-want +got):\n%s", d)
			}
			checkWarning(t, resp, tc.warning)
		})
	}
}
