package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/testing/crdschema"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// captureOnce observes every target of ba and captures its results, as Reconcile does,
// with a ledger key of its own.
func captureOnce(t *testing.T, c client.Client, ba *v1alpha1.BatchAccount) ([]account.Result, string) {
	t.Helper()
	return captureWith(t, &Reconciler{Client: c, Now: func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }}, ba)
}

// captureWith is captureOnce by r, whose ledger key reads the chunks it wrote before.
func captureWith(t *testing.T, r *Reconciler, ba *v1alpha1.BatchAccount) ([]account.Result, string) {
	t.Helper()
	ctx := context.Background()
	m := account.Compile(ba.Namespace, &ba.Spec)
	_, seen, err := r.observeAccount(ctx, ba, m)
	if err != nil {
		t.Fatal(err)
	}
	res, ruleErr, err := r.captureResults(ctx, ba, m, seen)
	if err != nil {
		t.Fatal(err)
	}
	return res, ruleErr
}

func chunksOf(t *testing.T, c client.Client) []v1alpha1.ShardResults {
	t.Helper()
	var list v1alpha1.ShardResultsList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// shardAReport is a valid report of shard A, on the revisions of report, whose output
// has digest: two of them with other digests conflict.
func shardAReport(t *testing.T, digest string) string {
	t.Helper()
	msg, err := result.Encode(result.Report{Shard: "A", InputRevision: "D", ModelRevision: "m-2026-11", Digest: "sha256:" + digest, Records: 1, Valid: 1})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func reportOf(t *testing.T, shard string) string {
	t.Helper()
	msg, err := result.Encode(result.Report{Shard: shard, InputRevision: "D", ModelRevision: "m", Output: "s3://b/" + shard, Digest: "sha256:" + shard, Records: 1, Valid: 1})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestChunksBelongToOneAccount: results are kept in chunks named after and labelled with
// the account's UID, so a recreated account of the same name never adopts the chunks of
// its predecessor (garbage collection deletes those with it), and a 253-character name
// works (it is no label value).
func TestChunksBelongToOneAccount(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	longName := strings.Repeat("a", 253)
	for _, name := range []string{"ij245", longName} {
		t.Run(fmt.Sprintf("name of %d characters", len(name)), func(t *testing.T) {
			j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
			ba := wrappers.MakeBatchAccount(name, "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("").Obj()
			ba.UID = "account-2"
			old := wrappers.MakeBatchAccount(name, "ns").Obj()
			old.UID = "account-1"
			// The predecessor's chunk: same namespace and name, its own UID as owner.
			stale := newChunk(old, chunkName(old.UID, "0", 0), 0)
			stale.Labels = v1alpha1.ChunkLabels(ba) // even a label that claims the new account
			stale.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", JobUID: "j-uid", Pod: "gone", PodUID: "gone-uid"}}
			pod := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now, reportOf(t, "A")).Obj()
			c := fakeClient(t, ba, j, pod, stale)
			results, _ := captureOnce(t, c, ba)
			if len(results) != 1 || results[0].PodUID != pod.UID {
				t.Fatalf("results = %+v; want only pod j-0's", results)
			}
			var own *v1alpha1.ShardResults
			for i, ch := range chunksOf(t, c) {
				if metav1.IsControlledBy(&ch, ba) {
					own = &chunksOf(t, c)[i]
				}
			}
			if own == nil || own.Name != "account-2-0" || own.AccountUID != ba.UID || own.Labels[v1alpha1.LabelAccountUID] != "account-2" {
				t.Fatalf("own chunk = %+v", own)
			}
			if _, labelled := own.Labels[v1alpha1.LabelAccount]; labelled != (len(name) <= 63) {
				t.Errorf("name label present = %v for a name of %d characters", labelled, len(name))
			}
		})
	}
}

// TestChunksStayBounded: retries beyond MaxResultsPerShard are counted as dropped pods,
// not stored; a chunk spills into a continuation before ChunkByteBudget; and the
// sequence of kept results continues from the highest recorded.
func TestChunksStayBounded(t *testing.T) {
	ba := wrappers.MakeBatchAccount("big", "ns").ShardCount("s", 256).Obj()
	ba.UID = "acct"
	rc := loadChunks(ba, nil)
	output := strings.Repeat("o", 1000)
	const perShard = MaxResultsPerShard + 2
	for ord := range 256 {
		for a := range perShard {
			rc.add(v1alpha1.RecordedResult{Ordinal: int32(ord), Target: "job/j", Pod: fmt.Sprintf("p-%d-%d", ord, a),
				PodUID: types.UID(fmt.Sprintf("uid-%d-%d", ord, a)), Output: output}, true)
		}
	}
	chunks := rc.all()
	kept, dropped, maxSeq := 0, 0, int64(0)
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		if len(b) > ChunkByteBudget {
			t.Errorf("chunk %s is %d bytes, over the %d budget", c.Name, len(b), ChunkByteBudget)
		}
		kept += len(c.Results)
		dropped += len(c.DroppedPods)
		for _, r := range c.Results {
			maxSeq = max(maxSeq, r.Sequence)
		}
	}
	if kept != 256*MaxResultsPerShard || dropped != 256*(perShard-MaxResultsPerShard) {
		t.Errorf("kept %d, dropped %d; want %d and %d", kept, dropped, 256*MaxResultsPerShard, 256*(perShard-MaxResultsPerShard))
	}
	if len(chunks) < 2 {
		t.Errorf("%d chunks: the span never spilled", len(chunks))
	}
	if maxSeq != int64(kept) {
		t.Errorf("highest sequence %d, want %d (one per kept result, from 1)", maxSeq, kept)
	}
	// Reloaded, the record knows every pod it holds or dropped, and continues the sequence.
	again := loadChunks(ba, withOwner(ba, chunks))
	if len(again.recorded) != 256*perShard || again.nextSeq != maxSeq+1 {
		t.Errorf("reloaded: %d pods known, next sequence %d", len(again.recorded), again.nextSeq)
	}
}

// TestEachIdentityKeepsItsResults: the bound on a shard's kept results is per Job
// identity: an identity past it has its retries dropped, and the next identity (a JobSet
// restart attempt, a repair Job) still has its first results kept, also after a reload;
// the shard's results from all its identities are bounded too.
func TestEachIdentityKeepsItsResults(t *testing.T) {
	ba := wrappers.MakeBatchAccount("restarts", "ns").ShardCount("s", 1).Obj()
	ba.UID = "acct"
	result := func(target string, job types.UID, a int) v1alpha1.RecordedResult {
		return v1alpha1.RecordedResult{Ordinal: 0, Target: target, JobUID: job, Pod: fmt.Sprintf("%s-%d", job, a), PodUID: types.UID(fmt.Sprintf("%s-pod-%d", job, a))}
	}
	rc := loadChunks(ba, nil)
	for a := range MaxResultsPerShard + 3 {
		rc.add(result("jobset/ts/w/0", "attempt-0", a), false)
	}
	reloaded := loadChunks(ba, withOwner(ba, rc.all()))
	reloaded.add(result("jobset/ts/w/0", "attempt-0", 99), false)
	reloaded.add(result("jobset/ts/w/0", "attempt-1", 0), false)
	reloaded.add(result("job/ts-repair", "repair", 0), true)
	kept := map[types.UID]int{}
	dropped := 0
	for _, c := range reloaded.all() {
		for _, r := range c.Results {
			kept[r.JobUID]++
		}
		dropped += len(c.DroppedPods)
	}
	want := map[types.UID]int{"attempt-0": MaxResultsPerShard, "attempt-1": 1, "repair": 1}
	if !maps.Equal(kept, want) || dropped != 4 {
		t.Errorf("kept %v, dropped %d; want %v and 4 (attempt 0's retries past the bound)", kept, dropped, want)
	}
	// Identities without end (restarts, Jobs deleted and created again) still keep the
	// shard's results bounded.
	for i := range 2 * MaxResultsPerShardTotal {
		reloaded.add(result("jobset/ts/w/0", types.UID(fmt.Sprintf("attempt-%d", i+2)), 0), false)
	}
	total := 0
	for _, c := range reloaded.all() {
		total += len(c.Results)
	}
	if total != MaxResultsPerShardTotal {
		t.Errorf("%d results of one shard kept; want the bound, %d", total, MaxResultsPerShardTotal)
	}
	// The identity a target follows takes the place of the oldest results of others,
	// up to its own MaxResultsPerShard, and the shard stays within its bound; after a
	// reload too.
	for a := range MaxResultsPerShard - 1 {
		reloaded.add(result("jobset/ts/w/0", "current", a), true)
	}
	again := loadChunks(ba, withOwner(ba, reloaded.all()))
	for a := MaxResultsPerShard - 1; a <= MaxResultsPerShard; a++ {
		again.add(result("jobset/ts/w/0", "current", a), true)
	}
	kept = map[types.UID]int{}
	total, droppedPods := 0, map[types.UID]bool{}
	for _, c := range again.all() {
		for _, r := range c.Results {
			kept[r.JobUID]++
			total++
		}
		for _, uid := range c.DroppedPods {
			droppedPods[uid] = true
		}
	}
	if kept["current"] != MaxResultsPerShard || total != MaxResultsPerShardTotal {
		t.Errorf("the followed identity kept %d results, the shard %d; want %d and %d", kept["current"], total, MaxResultsPerShard, MaxResultsPerShardTotal)
	}
	if kept["attempt-0"] != 0 || !droppedPods["attempt-0-pod-0"] {
		t.Errorf("the oldest results (attempt 0's) were not the ones to go: kept %v", kept)
	}
}

// TestCurrentAttemptResultKeptAfterManyRestarts: a JobSet child whose index 0 succeeded
// in more restart attempts than the shard keeps results of (MaxResultsPerShardTotal),
// each superseded, still has the current attempt's result recorded and accepted.
func TestCurrentAttemptResultKeptAfterManyRestarts(t *testing.T) {
	js := wrappers.MakeJobSet("ts", "ns").ReplicatedJob(wrappers.MakeReplicatedJob("workers").Obj()).Obj()
	js.UID = "ts-uid"
	child := func(attempt int) *wrappers.JobWrapper {
		return wrappers.MakeJob("ts-workers-0", "ns").Indexed(1).UID(fmt.Sprintf("child-a%d-uid", attempt)).
			JobSetChild(js, "workers", 0, attempt).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults)
	}
	acct := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).ShardCount("s", 1).
		AssignJobSet("ts", "workers", 0, "0", "0").RequireResults("").Revisions("D", "m").Obj()
	f := newFixture(t, hooks{}, acct, js)
	ctx := context.Background()
	const attempts = MaxResultsPerShardTotal + 1
	var last client.Object
	for a := range attempts {
		if last != nil {
			if err := f.c.Delete(ctx, last); err != nil {
				t.Fatal(err)
			}
		}
		// Each attempt's Job counted its pod's success (the result stands once it did).
		job := child(a).Completed("0", 1).Obj()
		if err := f.c.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		last = job
		pod := wrappers.MakeIndexPod(job, fmt.Sprintf("ts-workers-0-0-a%d", a), 0).
			Succeeded(testNow.Add(time.Duration(a)*time.Minute), reportOf(t, "s0")).Obj()
		if err := f.c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if _, err := f.reconcile("acct"); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.account(t, "acct").Status; st.Shards.Accepted != 1 {
		t.Errorf("accepted %d/1 after the current attempt reported a valid result (results %+v)", st.Shards.Accepted, st.Results)
	}
}

func withOwner(ba *v1alpha1.BatchAccount, chunks []v1alpha1.ShardResults) []v1alpha1.ShardResults {
	for i := range chunks {
		chunks[i].OwnerReferences = newChunk(ba, "x", 0).OwnerReferences
	}
	return chunks
}

// TestRuleThatDoesNotCompile: no result is recorded (the pods stay held, their messages
// unjudged) and the error is handed to the account; fixing the rule records them.
func TestRuleThatDoesNotCompile(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("result.nosuchfield ==").Obj()
	ba.UID = "acct-uid"
	pod := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now, reportOf(t, "A")).Obj()
	c := fakeClient(t, ba, j, pod)
	results, ruleErr := captureOnce(t, c, ba)
	if ruleErr == "" || len(results) != 0 || len(chunksOf(t, c)) != 0 {
		t.Fatalf("rule error %q, %d results, %d chunks; want an error and nothing recorded", ruleErr, len(results), len(chunksOf(t, c)))
	}
	ba.Spec.Acceptance.Rule = "result.valid == result.records"
	results, ruleErr = captureOnce(t, c, ba)
	if ruleErr != "" || len(results) != 1 || results[0].RejectReason != "" {
		t.Errorf("after the fix: rule error %q, results %+v", ruleErr, results)
	}
}

// TestResultJudgedUnderAnEarlierRuleIsCapturedAgain: a result captured under a rule the
// spec no longer has (an edit that slipped in between a capture and the status recording
// it) is no record of its pod: the pod stays held and is captured and judged again under
// the spec's rule, so the edit loses no result. Nor does a result let its pod go before
// the status counts it: until then the rule may still change.
func TestResultJudgedUnderAnEarlierRuleIsCapturedAgain(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("result.records > 100").Obj()
	ba.UID = "acct-uid"
	pod := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now, reportOf(t, "A")).Obj()
	c := fakeClient(t, ba, j, pod)
	releaser := &PodReleaser{Client: c}
	r := &Reconciler{Client: c, Now: func() time.Time { return now.Add(time.Hour) }}

	results, _ := captureWith(t, r, ba)
	if len(results) != 1 || results[0].RejectReason != v1alpha1.RejectionCriterionNotMet {
		t.Fatalf("under the first rule: %+v, want one result failing it", results)
	}
	if missing, err := releaser.unrecorded(ctx, pod, []string{"acct"}); err != nil || len(missing) != 1 {
		t.Fatalf("recorded under the first rule, the status counting none yet, the pod must wait; unrecorded = %v, %v, want [acct]", missing, err)
	}

	ba.Spec.Acceptance.Rule = "result.valid == result.records"
	if err := c.Update(ctx, ba); err != nil {
		t.Fatal(err)
	}
	if missing, err := releaser.unrecorded(ctx, pod, []string{"acct"}); err != nil || len(missing) != 1 {
		t.Errorf("after the rule changed, the pod's only result was judged under the old rule; unrecorded = %v, %v, want [acct]", missing, err)
	}
	results, _ = captureWith(t, r, ba)
	var judged []string
	for _, r := range results {
		judged = append(judged, fmt.Sprintf("%s:%q", r.RuleDigest, r.RejectReason))
	}
	if len(results) != 2 || results[1].RuleDigest != ba.Spec.ResultDigest() || results[1].RejectReason != "" {
		t.Errorf("results %v; want the pod captured again and accepted under the spec's rule", judged)
	}
	// The status write that counts them freezes the rule (the CRD's transition rule).
	ba.Status.Results.Recorded = int32(len(results))
	if err := c.Status().Update(ctx, ba); err != nil {
		t.Fatal(err)
	}
	if missing, err := releaser.unrecorded(ctx, pod, []string{"acct"}); err != nil || len(missing) != 0 {
		t.Errorf("captured again under the spec's rule and counted, the pod is recorded; unrecorded = %v, %v", missing, err)
	}
}

// TestFirstSuccessOfAnIndexStands: two pods of one index that both succeeded, captured in
// one reconcile (the controller was down, or both ended between two reconciles), are
// recorded in the order they finished, whatever order the cache lists them in (a real
// informer's index is a map): the first success of the index stands, the later one with
// another digest is a conflict, and the verdict does not depend on pod names.
func TestFirstSuccessOfAnIndexStands(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	pod := func(name string, finished time.Time, digest string) *corev1.Pod {
		return wrappers.MakeIndexPod(j, name, 0).Succeeded(finished, shardAReport(t, digest)).Obj()
	}
	cases := []struct {
		name       string
		pods       []*corev1.Pod
		wantOrder  []string
		wantDigest string
	}{
		{"the first success sorts first by name",
			[]*corev1.Pod{pod("j-0-a", now.Add(-time.Minute), "first"), pod("j-0-b", now, "second")},
			[]string{"j-0-a", "j-0-b"}, "sha256:first"},
		{"the first success sorts last by name",
			[]*corev1.Pod{pod("j-0-a", now, "second"), pod("j-0-b", now.Add(-time.Minute), "first")},
			[]string{"j-0-b", "j-0-a"}, "sha256:first"},
		{"ended at the same time: by name",
			[]*corev1.Pod{pod("j-0-b", now, "second"), pod("j-0-a", now, "first")},
			[]string{"j-0-a", "j-0-b"}, "sha256:first"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("").Obj()
			ba.UID = "acct-uid"
			c := fakeClient(t, ba, j, tc.pods[0], tc.pods[1])
			results, _ := captureOnce(t, c, ba)
			var order []string
			for _, r := range results {
				order = append(order, r.Pod)
			}
			if !slices.Equal(order, tc.wantOrder) {
				t.Errorf("recorded %v, want %v: the first success of the index first", order, tc.wantOrder)
			}
			m := account.Compile(ba.Namespace, &ba.Spec)
			standing := account.StandingResults(m, &ba.Spec, map[string]types.UID{results[0].Target: j.UID}, nil, nil, results)
			if got := standing[0].Digest; got != tc.wantDigest {
				t.Errorf("standing digest %q, want %q (the first success's)", got, tc.wantDigest)
			}
		})
	}
}

// TestResultReadFromAnEarlierContainerIsCapturedAgain: spec.acceptance.resultContainer
// decides a verdict as the rule does, and the webhook freezes it only once the status
// counts a result. A result read from the container the spec named at capture, when an
// edit of resultContainer slipped in between that capture and the status recording it,
// is no record of its pod: the pod is captured again from the container the spec names
// now, and the earlier verdict does not stand.
func TestResultReadFromAnEarlierContainerIsCapturedAgain(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	msg, err := result.Encode(result.Report{Shard: "A", InputRevision: "D", ModelRevision: "m-2026-11", Digest: "sha256:A", Records: 1, Valid: 1})
	if err != nil {
		t.Fatal(err)
	}
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	cases := []struct {
		name       string
		first, now string // spec.acceptance.resultContainer at capture, and after the edit
		wantFirst  string // the first capture's rejection
	}{
		{"the default, then the reporter", "", "reporter", result.ReasonMissing},
		{"the proxy, then the reporter", "proxy", "reporter", result.ReasonMissing},
		{"the reporter, then the default", "reporter", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A").AssignJob("j", "0", "A").RequireResults("result.valid == result.records").
				ResultContainer(tc.first).Obj()
			ba.UID = "acct-uid"
			// The worker leaves no message; the reporter, a second container, reports.
			pod := wrappers.MakeIndexPod(j, "j-0", 0).Sidecar("proxy").Sidecar("reporter").Phase(corev1.PodSucceeded).ContainerStatuses(
				corev1.ContainerStatus{Name: "proxy", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now)}}},
				corev1.ContainerStatus{Name: "reporter", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg, FinishedAt: metav1.NewTime(now)}}},
				corev1.ContainerStatus{Name: "worker", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now)}}},
			).Obj()
			c := fakeClient(t, ba, j, pod)
			releaser := &PodReleaser{Client: c}
			r := &Reconciler{Client: c, Now: func() time.Time { return now.Add(time.Hour) }}

			results, _ := captureWith(t, r, ba)
			if len(results) != 1 || results[0].RejectReason != tc.wantFirst {
				t.Fatalf("from container %q: %+v, want one result rejected as %q", tc.first, results, tc.wantFirst)
			}
			ba.Spec.Acceptance.ResultContainer = tc.now
			if err := c.Update(ctx, ba); err != nil {
				t.Fatal(err)
			}
			if missing, err := releaser.unrecorded(ctx, pod, []string{"acct"}); err != nil || len(missing) != 1 {
				t.Errorf("after resultContainer changed, the pod's only result was read from another container; unrecorded = %v, %v, want [acct]", missing, err)
			}
			results, _ = captureWith(t, r, ba)
			if len(results) != 2 {
				t.Fatalf("results %+v; want the pod captured again from container %q", results, tc.now)
			}
			m := account.Compile(ba.Namespace, &ba.Spec)
			standing := account.StandingResults(m, &ba.Spec, map[string]types.UID{results[0].Target: j.UID}, nil, nil, results)
			got, ok := standing[0]
			switch wantAccepted := tc.now == "reporter"; {
			case wantAccepted && (!ok || got.Pod != "j-0" || got.Sequence != 2):
				t.Errorf("standing %+v; want the second capture, read from %q", got, tc.now)
			case !wantAccepted && ok:
				t.Errorf("standing %+v; want none: the worker, the default container now, left no message", got)
			}
		})
	}
}

// TestEvictionSparesFollowedIdentities: past MaxResultsPerShardTotal results of a shard,
// the identity a target follows makes room by dropping the oldest result of another
// identity, one that never counts for the shard (StaleIdentity). A repair's Job, or the
// deleted Job whose record still stands for its target, is an identity the account
// follows too: its result may be the one that stands for the shard, and dropping it lets
// a later rejected result decide the shard (or, dropped as a pod, lets its pod go
// unjudged). Only superseded identities' results make room.
func TestEvictionSparesFollowedIdentities(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	r := withUID(wrappers.MakeJob("r", "ns").Indexed(1).Obj(), "r-uid")
	cases := []struct {
		name string
		// oldest is the oldest result of shard A: of job/r under uid, or of a superseded
		// identity of job/j; the rest are superseded identities' of job/j.
		oldestTarget string
		oldestUID    types.UID
		objs         []client.Object
		status       []v1alpha1.TargetStatus
		wantKept     bool
	}{
		{name: "the oldest is the repair's, whose Job is observed", oldestTarget: "job/r", oldestUID: "r-uid",
			objs: []client.Object{r}, wantKept: true},
		{name: "the oldest is the repair's, its deleted Job's record standing", oldestTarget: "job/r", oldestUID: "r-uid",
			status:   []v1alpha1.TargetStatus{{Name: "job/r", Job: "r", UID: "r-uid", Deleted: true, CompletedIndexes: "0", Terminal: "Complete"}},
			wantKept: true},
		{name: "the oldest is a superseded identity's", oldestTarget: "job/j", oldestUID: "j-old-oldest", objs: []client.Object{r}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A").AssignJob("j", "0", "A").SpecRepair("r", "0", "A").
				RequireResults("").Obj()
			ba.UID = "acct-uid"
			ba.Status.Targets = tc.status
			ba.Status.Results.Recorded = MaxResultsPerShardTotal
			rec := func(target string, uid types.UID, seq int64) v1alpha1.RecordedResult {
				return v1alpha1.RecordedResult{Ordinal: 0, Shard: "A", Target: target, JobUID: uid, Index: 0,
					Pod: fmt.Sprintf("%s-%d", uid, seq), PodUID: types.UID(fmt.Sprintf("%s-pod-%d", uid, seq)),
					InputRevision: "D", ModelRevision: "m-2026-11", Digest: "sha256:A", RuleDigest: ba.Spec.ResultDigest(),
					RecordedAt: metav1.NewTime(now), Sequence: seq}
			}
			chunk := newChunk(ba, chunkName(ba.UID, "0", 0), 0)
			chunk.Results = append(chunk.Results, rec(tc.oldestTarget, tc.oldestUID, 1))
			for i := 2; i <= MaxResultsPerShardTotal; i++ {
				res := rec("job/j", types.UID(fmt.Sprintf("j-old-%d", i)), int64(i))
				res.RejectReason, res.RejectMessage = v1alpha1.RejectionCriterionNotMet, "no"
				chunk.Results = append(chunk.Results, res)
			}
			rcl := &Reconciler{Now: func() time.Time { return now.Add(time.Hour) }}
			key, err := rcl.ledger().Key(ctx)
			if err != nil {
				t.Fatal(err)
			}
			key.Sign(chunk)
			// The current identity of job/j reports a result that fails: it claims shard B.
			pod := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(now, reportOf(t, "B")).Obj()
			objs := append([]client.Object{ba, j, pod, chunk}, tc.objs...)
			rcl.Client = fakeClient(t, objs...)
			results, _ := captureWith(t, rcl, ba)

			kept := slices.ContainsFunc(results, func(res account.Result) bool { return res.JobUID == tc.oldestUID })
			if kept != tc.wantKept {
				t.Errorf("the oldest result (%s, %s) kept: %v, want %v", tc.oldestTarget, tc.oldestUID, kept, tc.wantKept)
			}
			if len(results) != MaxResultsPerShardTotal {
				t.Errorf("%d results of shard A kept, want the bound %d", len(results), MaxResultsPerShardTotal)
			}
			if !tc.wantKept {
				return
			}
			m := account.Compile(ba.Namespace, &ba.Spec)
			current := map[string]types.UID{"job/j": j.UID, "job/r": "r-uid"}
			if got, ok := account.StandingResults(m, &ba.Spec, current, nil, nil, results)[0]; !ok || got.JobUID != "r-uid" {
				t.Errorf("standing for A: %+v (found %v); want the repair's accepted result", got, ok)
			}
		})
	}
}

// TestFirstSuccessOfAShardStandsAcrossTargets: a shard that an original assignment and a
// repair both map has an identity on each target, and when both succeeded before one
// reconcile captured either, their results are recorded in the order they finished, not
// in the order the spec names their targets: the first success of the shard stands, the
// later one with another digest is the conflict.
func TestFirstSuccessOfAShardStandsAcrossTargets(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	j := withUID(wrappers.MakeJob("j", "ns").Indexed(1).Obj(), "j-uid")
	r := withUID(wrappers.MakeJob("r", "ns").Indexed(1).Obj(), "r-uid")
	cases := []struct {
		name                string
		original, repair    time.Time // when the pods of job j and of its repair r finished
		wantFirst, wantDgst string
	}{
		{"the repair's pod finished first", now, now.Add(-time.Minute), "r-0", "sha256:repair"},
		{"the original's pod finished first", now.Add(-time.Minute), now, "j-0", "sha256:original"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A").AssignJob("j", "0", "A").SpecRepair("r", "0", "A").RequireResults("").Obj()
			ba.UID = "acct-uid"
			pj := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(tc.original, shardAReport(t, "original")).Obj()
			pr := wrappers.MakeIndexPod(r, "r-0", 0).Succeeded(tc.repair, shardAReport(t, "repair")).Obj()
			results, _ := captureOnce(t, fakeClient(t, ba, j, r, pj, pr), ba)
			if len(results) != 2 || results[0].Pod != tc.wantFirst {
				t.Fatalf("recorded %+v, want two results, %s's first", results, tc.wantFirst)
			}
			m := account.Compile(ba.Namespace, &ba.Spec)
			current := map[string]types.UID{"job/j": j.UID, "job/r": r.UID}
			if got := account.StandingResults(m, &ba.Spec, current, nil, nil, results)[0].Digest; got != tc.wantDgst {
				t.Errorf("standing digest %q, want %q (the first success's)", got, tc.wantDgst)
			}
		})
	}
}

// TestAcceptedAccountCapturesNoReRun: an Accepted account follows none but the
// identities on its record, so it records no result of a Job re-run under a target's
// name since (another batch's): recording them, as StaleIdentity, would write its chunks
// and its status after its verdict, and hold the re-run's pods for it. A pod of the
// identity on record is still recorded, and an account whose spec changed since its
// verdict follows the target's name again.
func TestAcceptedAccountCapturesNoReRun(t *testing.T) {
	now := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	rerun := withUID(wrappers.MakeJob("j", "ns").Indexed(1).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj(), "j-again")
	earlier := withUID(wrappers.MakeJob("j", "ns").Indexed(1).PodLabel(v1alpha1.LabelScope, v1alpha1.ScopeResults).Obj(), "j-earlier")
	ofRerun := wrappers.MakeIndexPod(rerun, "j-again-0", 0).Succeeded(now, shardAReport(t, "again")).Obj()
	ofRecord := wrappers.MakeIndexPod(earlier, "j-earlier-0", 0).Succeeded(now.Add(-time.Hour), shardAReport(t, "earlier")).Obj()
	accepted := func(generation int64) *v1alpha1.BatchAccount {
		ba := wrappers.MakeBatchAccount("acct", "ns").UID("acct-uid").Generation(1).Shards("A").AssignJob("j", "0", "A").RequireResults("").
			TargetStatus(v1alpha1.TargetStatus{Name: "job/j", Job: "j", UID: "j-earlier", Deleted: true, Completions: 1, Required: "0",
				CompletedIndexes: "0", Terminal: "Complete"}).
			Condition(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "", now.Add(-time.Minute)).Obj()
		ba.Status.ObservedGeneration = 1
		ba.Generation = generation
		return ba
	}
	cases := []struct {
		name string
		ba   *v1alpha1.BatchAccount
		pods []*corev1.Pod
		// want are the pods whose results are recorded.
		want []string
	}{
		{"Accepted: the re-run's pod is not recorded", accepted(1), []*corev1.Pod{ofRerun}, nil},
		{"Accepted: the pod of the identity on record is", accepted(1), []*corev1.Pod{ofRerun, ofRecord}, []string{"j-earlier-0"}},
		{"its spec changed since: the re-run is followed", accepted(2), []*corev1.Pod{ofRerun}, []string{"j-again-0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tc.ba, rerun.DeepCopy()}
			for _, p := range tc.pods {
				objs = append(objs, p.DeepCopy())
			}
			c := fakeClient(t, objs...)
			results, _ := captureOnce(t, c, tc.ba)
			var got []string
			for _, r := range results {
				got = append(got, r.Pod)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("recorded the results of %v, want %v", got, tc.want)
			}
			var recorded []string
			for _, ch := range chunksOf(t, c) {
				for _, r := range ch.Results {
					recorded = append(recorded, r.Pod)
				}
				for _, uid := range ch.DroppedPods {
					recorded = append(recorded, string(uid))
				}
			}
			if !slices.Equal(recorded, tc.want) {
				t.Errorf("chunks hold %v, want %v", recorded, tc.want)
			}
		})
	}
}

// TestEvictionKeepsChunksValid: the identity a target follows makes room for its result
// by turning the oldest result of a superseded identity into a dropped pod. When the
// chunk holding that result already lists as many dropped pods as a chunk may (the CRD's
// maxItems), the API server would refuse it on every write from then on, and no result of
// the account would be recorded again: the dropped pod goes to a chunk with room, and
// every chunk stays one the API server admits.
func TestEvictionKeepsChunksValid(t *testing.T) {
	sv := crdschema.Validator(t, "batchledger.dev_shardresults.yaml")
	const maxDropped = 16384 // the CRD's maxItems of droppedPods
	for _, tc := range []struct {
		name    string
		dropped int // dropped pods the oldest result's chunk lists already
	}{
		{name: "the oldest result's chunk has room", dropped: 0},
		{name: "the oldest result's chunk lists all the dropped pods it may", dropped: maxDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := wrappers.MakeBatchAccount("acct", "ns").ShardCount("s", 1).Obj()
			ba.UID = "acct-uid"
			full := newChunk(ba, chunkName(ba.UID, "0", 0), 0)
			for i := range MaxResultsPerShardTotal {
				uid := types.UID(fmt.Sprintf("j-old-%d", i))
				full.Results = append(full.Results, v1alpha1.RecordedResult{Ordinal: 0, Target: "job/j", JobUID: uid, Pod: string(uid),
					PodUID: uid + "-pod", RecordedAt: metav1.NewTime(testNow), Sequence: int64(i + 1)})
			}
			for i := range tc.dropped {
				full.DroppedPods = append(full.DroppedPods, types.UID(fmt.Sprintf("dropped-%d", i)))
			}
			rc := loadChunks(ba, []v1alpha1.ShardResults{*full})
			rc.followed = map[identityKey]bool{{"job/j", "j-uid"}: true}
			rc.add(v1alpha1.RecordedResult{Ordinal: 0, Target: "job/j", JobUID: "j-uid", Pod: "j-0", PodUID: "j-0-uid", RecordedAt: metav1.NewTime(testNow)}, true)

			kept, dropped := false, map[types.UID]bool{}
			for _, c := range rc.all() {
				c.APIVersion, c.Kind = v1alpha1.GroupVersion.String(), "ShardResults"
				b, err := json.Marshal(c)
				if err != nil {
					t.Fatal(err)
				}
				var obj map[string]any
				if err := json.Unmarshal(b, &obj); err != nil {
					t.Fatal(err)
				}
				if errs := validation.ValidateCustomResource(nil, obj, sv); len(errs) > 0 {
					t.Errorf("the API server refuses chunk %s (%d results, %d dropped pods): %v", c.Name, len(c.Results), len(c.DroppedPods), errs.ToAggregate())
				}
				kept = kept || slices.ContainsFunc(c.Results, func(r v1alpha1.RecordedResult) bool { return r.PodUID == "j-0-uid" })
				for _, uid := range c.DroppedPods {
					dropped[uid] = true
				}
			}
			if !kept || !dropped["j-old-0-pod"] {
				t.Errorf("the followed identity's result kept: %v, the oldest result's pod dropped: %v; want both", kept, dropped["j-old-0-pod"])
			}
		})
	}
}

// TestResultsOfAJobReadLive: the succeeded pods of a Job no scope cache holds (it ran
// before its account required results) are read from the API server by the Job's own
// selector: a Job with manualSelector gives its pods neither the controller-uid nor the
// job-name label (the API server adds them only to a selector it generates), and its
// pods' results must be read all the same.
func TestResultsOfAJobReadLive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		manual bool
	}{
		{name: "a generated selector"},
		{name: "a manual selector", manual: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := jobJ("").PodLabel("app", "infer").Completed("0-1", 2).Complete(testNow).Obj()
			if tc.manual {
				j.Spec.ManualSelector = ptr.To(true)
				j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "infer"}}
			}
			objs := []client.Object{accountOfJ().RequireResults("").Obj(), j}
			for i, shard := range []string{"A", "B"} {
				p := wrappers.MakeIndexPod(j, fmt.Sprintf("j-%d", i), i).Succeeded(testNow.Add(-time.Minute), report(t, shard))
				if tc.manual {
					p.NoLabel(batchv1.JobNameLabel).NoLabel(batchv1.ControllerUidLabel)
				}
				objs = append(objs, p.Obj())
			}
			f := newFixture(t, hooks{}, objs...)
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			ba := f.account(t, "acct")
			if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted); got != "True "+v1alpha1.ReasonAccepted || ba.Status.Results.Recorded != 2 {
				t.Errorf("Accepted = %q with %d results recorded; want True %s with 2", got, ba.Status.Results.Recorded, v1alpha1.ReasonAccepted)
			}
		})
	}
}
