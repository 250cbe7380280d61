package relations

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetapi "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// builderIndexer registers field indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// reader is a fake client holding objs with this package's field indexes.
func reader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	if err := RegisterIndexes(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

func names(accounts []*v1alpha1.BatchAccount) []string {
	var out []string
	for _, ba := range accounts {
		out = append(out, ba.Name)
	}
	slices.Sort(out)
	return out
}

// TestResolveTarget: a Job target resolves by name, a JobSet target to its current
// child; a missing Job or a target in another namespace resolves to nothing.
func TestResolveTarget(t *testing.T) {
	cur := namedChild("train", "workers", 1, 1)
	deleting := namedChild("train", "workers", 3, 2)
	deleting.DeletionTimestamp, deleting.Finalizers = &metav1.Time{Time: t0}, []string{"keep"}
	// Jobs an editor may write: the child's labels and a controller reference to the
	// JobSet, under another name.
	handMade := impostor("train-workers-1-retry", "train", "workers", 1, 9, jobSetOwner("jobset.x-k8s.io/v1alpha2", "train", "train-uid"))
	ofOldJobSet := namedChild("train", "workers", 2, 8)
	ofOldJobSet.OwnerReferences = []metav1.OwnerReference{jobSetOwner("jobset.x-k8s.io/v1alpha2", "train", "train-old-uid")}
	train := wrappers.MakeJobSet("train", ns).ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(4).Obj()).Obj()
	train.UID = "train-uid"
	c := reader(t, job("j"), cur, deleting, namedChild("train", "workers", 0, 5), handMade, train, ofOldJobSet,
		// JobSet "gone" no longer exists; its child is still followed (its UID is unknown).
		namedChild("gone", "workers", 0, 2), impostor("gone-workers-0-retry", "gone", "workers", 0, 3, jobSetOwner("jobset.x-k8s.io/v1alpha2", "gone", "gone-uid")))
	cases := []struct {
		name        string
		ref         v1alpha1.TargetRef
		want        string
		wantAttempt int32
	}{
		{"Job by name", v1alpha1.TargetRef{Job: "j"}, "j", 0},
		{"missing Job", v1alpha1.TargetRef{Job: "gone"}, "", 0},
		{"Job in another namespace", v1alpha1.TargetRef{Job: "j", Namespace: "other"}, "", 0},
		{"Job in its own namespace", v1alpha1.TargetRef{Job: "j", Namespace: ns}, "j", 0},
		{"JobSet child: the current attempt, never a Job of another name", v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](1)}, cur.Name, 1},
		{"JobSet child of no Job", v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](7)}, "", 0},
		{"JobSet child being deleted", v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](3)}, "", 0},
		{"JobSet child of an earlier JobSet of the name", v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers", JobIndex: ptr.To[int32](2)}, "", 0},
		{"JobSet gone: its child, never a Job of another name", v1alpha1.TargetRef{JobSet: "gone", ReplicatedJob: "workers"}, "gone-workers-0", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, attempt, err := ResolveTarget(context.Background(), c, ns, tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want || attempt != tc.wantAttempt {
				t.Errorf("ResolveTarget = %q attempt %d, want %q attempt %d", name, attempt, tc.want, tc.wantAttempt)
			}
		})
	}
}

// TestAccountLookups: the accounts naming a Job or JobSet, the live ones, and the scopes
// they give; accounts of another namespace never count.
func TestAccountLookups(t *testing.T) {
	deleting := wrappers.MakeBatchAccount("deleting", ns).Shards("A").AssignJob("j", "0", "A").RequireResults("").Obj()
	deleting.DeletionTimestamp, deleting.Finalizers = &metav1.Time{Time: t0}, []string{"keep"}
	c := reader(t,
		wrappers.MakeBatchAccount("counts-j", ns).Shards("A").AssignJob("j", "0", "A").Obj(),
		deleting,
		wrappers.MakeBatchAccount("workers-1", ns).Shards("A").AssignJobSet("train", "workers", 1, "0", "0").RequireResults("").Obj(),
		wrappers.MakeBatchAccount("workers-0", ns).Shards("A").AssignJobSet("train", "workers", 0, "0", "0").Obj(),
		wrappers.MakeBatchAccount("elsewhere", "other").Shards("A").AssignJob("j", "0", "A").RequireResults("").Obj(),
	)
	ctx := context.Background()
	all, err := AccountsNaming(ctx, c, ns, JobKey("j"), JobKey("j"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"counts-j", "deleting"}, names(all)); diff != "" {
		t.Errorf("AccountsNaming (-want +got):\n%s", diff)
	}
	live, err := LiveAccountsNaming(ctx, c, ns, JobKey("j"), kinds.Key(v1alpha1.TargetKindJobSet, "train"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"counts-j", "workers-0", "workers-1"}, names(live)); diff != "" {
		t.Errorf("LiveAccountsNaming (-want +got):\n%s", diff)
	}
	scopes := []struct {
		name string
		job  *batchv1.Job
		want string
	}{
		{"Job counted only (the account requiring results is being deleted)", job("j"), v1alpha1.ScopeCoverage},
		{"child whose account requires results", namedChild("train", "workers", 1, 3), v1alpha1.ScopeResults},
		{"child whose account counts", namedChild("train", "workers", 0, 0), v1alpha1.ScopeCoverage},
		{"child no account names", namedChild("train", "workers", 2, 0), ""},
		{"Job no account names", job("k"), ""},
		{"a hand-made Job with the labels of a child an account names", impostor("fake", "train", "workers", 1, 9), ""},
	}
	for _, tc := range scopes {
		t.Run(tc.name, func(t *testing.T) {
			accounts, err := AccountsNamingJob(ctx, c, tc.job)
			if got := AccountsScope(accounts); err != nil || got != tc.want {
				t.Errorf("AccountsScope(AccountsNamingJob) = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for rj, want := range map[string]string{"workers": v1alpha1.ScopeResults, "leader": ""} {
		if got, err := ReplicatedJobScope(ctx, c, &jobsetapi.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train"}}, rj); err != nil || got != want {
			t.Errorf("ReplicatedJobScope(%s) = %q, %v; want %q", rj, got, err, want)
		}
	}
}

// TestCapturedBy: a pod is captured by the accounts requiring results that name its
// target, whichever identity of the target it ran under: the current Job, a superseded
// JobSet child, or a deleted Job, recorded by the account or never observed by it (a
// restart can supersede a Job before any status records it).
func TestCapturedBy(t *testing.T) {
	legacyBefore := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	j := job("j")
	gone, unseen := job("gone"), job("unseen")
	recorded := wrappers.MakeBatchAccount("recorded", ns).Shards("A").AssignJob("gone", "0", "A").RequireResults("").Obj()
	recorded.Status.Targets = []v1alpha1.TargetStatus{{Name: "job/gone", Job: "gone", UID: gone.UID}}
	// JobSet names a child alike in every attempt; the Jobs need not exist for this.
	old, cur := namedChild("train", "workers", 0, 0), namedChild("train", "workers", 0, 1)
	c := reader(t, j,
		wrappers.MakeBatchAccount("needs-j", ns).Shards("A").AssignJob("j", "0", "A").RequireResults("").Obj(),
		wrappers.MakeBatchAccount("counts-j", ns).Shards("A").AssignJob("j", "0", "A").Obj(),
		wrappers.MakeBatchAccount("needs-workers", ns).Shards("A").AssignJobSet("train", "workers", 0, "0", "0").RequireResults("").Obj(),
		wrappers.MakeBatchAccount("needs-unseen", ns).Shards("A").AssignJob("unseen", "0", "A").RequireResults("").Obj(),
		recorded,
	)
	cases := []struct {
		name string
		pod  *wrappers.PodWrapper
		want []string
	}{
		{"pod of a Job named by one account requiring results", wrappers.MakeIndexPod(j, "p", 0), []string{"needs-j"}},
		{"pod of the current child", wrappers.MakeIndexPod(cur, "p", 0), []string{"needs-workers"}},
		{"pod of a superseded child", wrappers.MakeIndexPod(old, "p", 0), []string{"needs-workers"}},
		{"pod of another job index of the replicatedJob", wrappers.MakeIndexPod(namedChild("train", "workers", 1, 1), "p", 0), nil},
		{"pod of another replicatedJob", wrappers.MakeIndexPod(namedChild("train", "leader", 0, 1), "p", 0), nil},
		{"pod of a hand-made Job with the child's labels, a later attempt", wrappers.MakeIndexPod(impostor("fake", "train", "workers", 0, 9), "p", 0), nil},
		{"pod of a deleted Job the account recorded", wrappers.MakeIndexPod(gone, "p", 0), []string{"recorded"}},
		{"pod of a deleted Job the account never observed", wrappers.MakeIndexPod(unseen, "p", 0), []string{"needs-unseen"}},
		{"pod no Job controls", wrappers.MakeIndexPod(j, "p", 0).NotByJobController().NoOwner(), nil},
		{"pod orphaned from the named Job (propagationPolicy Orphan)", wrappers.MakeIndexPod(j, "p", 0).NoOwner(), []string{"needs-j"}},
		// The API server labels a Job's pod template only when it generates the selector.
		{"pod of a Job with a manual selector: no job-name or controller-uid label",
			wrappers.MakeIndexPod(j, "p", 0).NoLabel(batchv1.JobNameLabel).NoLabel(batchv1.ControllerUidLabel), []string{"needs-j"}},
		{"pod with a malformed index", wrappers.MakeIndexPod(j, "p", 0).Annotation(batchv1.JobCompletionIndexAnnotation, "x"), nil},
		{"pod the Job controller did not create", wrappers.MakeIndexPod(j, "p", 0).NotByJobController().Created(legacyBefore), nil},
		{"unmarked pod created before batchledger marked pods", wrappers.MakeIndexPod(j, "p", 0).NotByJobController().Created(legacyBefore.Add(-time.Second)), []string{"needs-j"}},
		{"pod claiming another Job's mark, created before batchledger marked pods",
			wrappers.MakeIndexPod(j, "p", 0).Annotation(v1alpha1.AnnotationIndexPod, "gone-uid/0").Created(legacyBefore.Add(-time.Second)), nil},
		{"pod the Job controller created for another index", wrappers.MakeIndexPod(j, "p", 0).Annotation(batchv1.JobCompletionIndexAnnotation, "1"), nil},
		{"pod the Job controller created for another Job", wrappers.MakeIndexPod(j, "p", 0).Annotation(v1alpha1.AnnotationIndexPod, "gone-uid/0"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CapturedBy(context.Background(), c, tc.pod.Obj(), legacyBefore)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CapturedBy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCapturedByAcceptedAccount: an Accepted account captures the pods of the identities
// on its record only (its targets' and those in history): a Job re-run under a target's
// name since, or a child of a JobSet applied again, is another batch's, whose results it
// would record as StaleIdentity, and whose pods it would hold for them. An account whose
// spec changed since its verdict follows its targets' names again.
func TestCapturedByAcceptedAccount(t *testing.T) {
	legacyBefore := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	identity := func(name, uid string) *batchv1.Job {
		j := job(name)
		j.UID = types.UID(uid)
		return j
	}
	workers := v1alpha1.TargetRef{JobSet: "llm", ReplicatedJob: "workers", JobIndex: ptr.To(int32(0))}
	recordedChild := namedChild("llm", "workers", 0, 0)
	againChild := namedChild("llm", "workers", 0, 0)
	againChild.UID = "llm-again-child-uid"
	accepted := func(name string, generation int64, assign func(*wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper,
		target v1alpha1.TargetStatus, history ...v1alpha1.SupersededIdentity) *v1alpha1.BatchAccount {
		w := assign(wrappers.MakeBatchAccount(name, ns).Generation(1).Shards("A").RequireResults("")).TargetStatus(target).
			Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", t0)
		ba := w.Obj()
		ba.Status.ObservedGeneration = 1
		ba.Status.History = history
		ba.Generation = generation
		return ba
	}
	rerunTarget := v1alpha1.TargetStatus{Name: "job/rerun", Job: "rerun", UID: "rerun-recorded"}
	superseded := v1alpha1.SupersededIdentity{Target: "job/rerun", Job: "rerun", UID: "rerun-superseded"}
	byName := func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
		return w.AssignJob("rerun", "0", "A")
	}
	c := reader(t,
		accepted("accepted", 1, byName, rerunTarget, superseded),
		accepted("changed-since", 2, byName, rerunTarget, superseded),
		accepted("accepted-llm", 1, func(w *wrappers.BatchAccountWrapper) *wrappers.BatchAccountWrapper {
			return w.AssignJobSet("llm", "workers", 0, "0", "0")
		}, v1alpha1.TargetStatus{Name: string(workers.Key()), Job: recordedChild.Name, UID: recordedChild.UID}),
	)
	cases := []struct {
		name string
		pod  *wrappers.PodWrapper
		want []string
	}{
		{"pod of the identity on record", wrappers.MakeIndexPod(identity("rerun", "rerun-recorded"), "p", 0), []string{"accepted", "changed-since"}},
		{"pod of a superseded identity in history", wrappers.MakeIndexPod(identity("rerun", "rerun-superseded"), "p", 0), []string{"accepted", "changed-since"}},
		{"pod of a Job re-run under the target's name since", wrappers.MakeIndexPod(identity("rerun", "rerun-again"), "p", 0), []string{"changed-since"}},
		{"pod of the child on record", wrappers.MakeIndexPod(recordedChild, "p", 0), []string{"accepted-llm"}},
		{"pod of a child of the JobSet applied again", wrappers.MakeIndexPod(againChild, "p", 0), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CapturedBy(context.Background(), c, tc.pod.Obj(), legacyBefore)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CapturedBy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWorkloadOfJob: a target's Job's Workload is the newest its Workload owner controls.
func TestWorkloadOfJob(t *testing.T) {
	j, ch := job("j"), namedChild("train", "workers", 0, 0)
	wls := []kueue.Workload{
		workload("j-old", t0, owner("Job", "j", true)), workload("j-new", t0.Add(time.Minute), owner("Job", "j", true)),
		workload("train", t0, owner("JobSet", "train", true)), workload("k", t0, owner("Job", "k", true)),
	}
	objs := []client.Object{j, ch}
	for i := range wls {
		objs = append(objs, &wls[i])
	}
	c := reader(t, objs...)
	for _, tc := range []struct {
		ref  v1alpha1.TargetRef
		job  *batchv1.Job
		want string
	}{{v1alpha1.TargetRef{Job: "j"}, j, "j-new"}, {v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "workers"}, ch, "train"}, {v1alpha1.TargetRef{Job: "none"}, job("none"), ""}} {
		wl, err := WorkloadOfTarget(context.Background(), c, tc.ref, tc.job)
		got := ""
		if wl != nil {
			got = wl.Name
		}
		if err != nil || got != tc.want {
			t.Errorf("WorkloadOfJob(%s) = %q, %v; want %q", tc.job.Name, got, err, tc.want)
		}
	}
}

// TestChunksOfAccount: an account's chunks are those of its namespace labelled with its
// UID, as v1alpha1.ChunkLabels selects them, whoever wrote them; never a chunk of another
// account, of another namespace, or without the label.
func TestChunksOfAccount(t *testing.T) {
	chunk := func(name, namespace string, labels map[string]string) *v1alpha1.ShardResults {
		return &v1alpha1.ShardResults{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}}
	}
	withUID := func(uid string) map[string]string { return map[string]string{v1alpha1.LabelAccountUID: uid} }
	c := reader(t,
		chunk("mine-0", ns, withUID("uid-a")),
		chunk("mine-256", ns, withUID("uid-a")),
		chunk("other", ns, withUID("uid-b")),
		chunk("elsewhere", "other", withUID("uid-a")),
		chunk("unlabelled", ns, nil),
		chunk("empty-label", ns, withUID("")),
	)
	tests := []struct {
		name string
		uid  string
		want []string
	}{
		{"the account's chunks", "uid-a", []string{"mine-0", "mine-256"}},
		{"another account's", "uid-b", []string{"other"}},
		{"an account no chunk names", "uid-c", nil},
		{"an empty UID, as the label selector matches it", "", []string{"empty-label"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("a", ns).Obj()
			ba.UID = types.UID(tc.uid)
			chunks, err := ChunksOfAccount(context.Background(), c, ba)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ch := range chunks {
				got = append(got, ch.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ChunksOfAccount (-want +got):\n%s", diff)
			}
		})
	}
}
