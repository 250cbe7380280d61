package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/ledgerkey"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// forgedChunk is what a user who may create ShardResults in the namespace can write: the
// account's UID label, accountUID and a controller ownerReference naming it (its UID is
// readable), and an accepted result for every shard of accountOfJ.
func forgedChunk(ba *v1alpha1.BatchAccount, name string) *v1alpha1.ShardResults {
	c := newChunk(ba, name, 0)
	for i, shard := range []string{"A", "B"} {
		c.Results = append(c.Results, v1alpha1.RecordedResult{Ordinal: int32(i), Shard: shard, Target: "job/j", JobUID: "j-uid",
			Index: int32(i), Pod: "j-" + shard, PodUID: types.UID("forged-" + shard), InputRevision: "D", ModelRevision: "m-2026-11",
			Output: "s3://b/" + shard, Digest: "sha256:" + shard, Records: 10, Valid: 10,
			RecordedAt: metav1.NewTime(testNow.Add(-time.Minute)), Sequence: int64(i + 1)})
	}
	return c
}

// ignoredEvents are the UnrecordedResultsIgnored events of f, by note.
func ignoredEvents(f *fixture) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		if e.Reason == v1alpha1.EventReasonUnrecordedResultsIgnored {
			out = append(out, e.Type+" "+e.Note)
		}
	}
	return out
}

// TestChunksTheManagerDidNotRecordAreIgnored: a chunk that names the account by label,
// accountUID and controller owner, with an accepted result for every shard, turns the
// account Accepted only when the manager's key signed it. Unsigned, signed with another
// key, edited after signing or owned by another object, it is not counted, reported once
// by a Warning (not again at the next reconcile), counted in status.results.ignoredChunks
// and the metric, and the pod releaser does not trust it either.
func TestChunksTheManagerDidNotRecordAreIgnored(t *testing.T) {
	// Every index completed, no pod left to report: only the chunk can make it Accepted.
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	otherKey, _, err := ledgerkey.Generate(testNow)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// chunk makes the chunk from a forged one, given the manager's key.
		chunk        func(c *v1alpha1.ShardResults, key *ledgerkey.Key)
		wantAccepted string
		wantWhy      string
	}{
		{
			name:         "signed by the manager: counted (the control case)",
			chunk:        func(c *v1alpha1.ShardResults, key *ledgerkey.Key) { key.Sign(c) },
			wantAccepted: "True Accepted",
		},
		{
			name:    "forged: no signature",
			chunk:   func(*v1alpha1.ShardResults, *ledgerkey.Key) {},
			wantWhy: "it carries no signature of the manager",
		},
		{
			name:    "forged: signed with another key",
			chunk:   func(c *v1alpha1.ShardResults, _ *ledgerkey.Key) { otherKey.Sign(c) },
			wantWhy: "it is signed with another key",
		},
		{
			name: "forged: a signature copied from another chunk",
			chunk: func(c *v1alpha1.ShardResults, key *ledgerkey.Key) {
				real := c.DeepCopy()
				real.Results = real.Results[:1]
				key.Sign(real)
				c.Annotations = real.Annotations
			},
			wantWhy: "its content was changed after the manager signed it",
		},
		{
			name: "tampered: a rejected result's valid count raised after signing",
			chunk: func(c *v1alpha1.ShardResults, key *ledgerkey.Key) {
				c.Results[1].Valid, c.Results[1].RejectReason = 3, v1alpha1.RejectionCriterionNotMet
				key.Sign(c)
				c.Results[1].Valid, c.Results[1].RejectReason = 10, ""
			},
			wantWhy: "its content was changed after the manager signed it",
		},
		{
			name: "tampered: an output edited after signing",
			chunk: func(c *v1alpha1.ShardResults, key *ledgerkey.Key) {
				key.Sign(c)
				c.Results[0].Output = "s3://elsewhere/A"
			},
			wantWhy: "its content was changed after the manager signed it",
		},
		{
			name: "signed, but its controller is another object than its label and accountUID name",
			chunk: func(c *v1alpha1.ShardResults, key *ledgerkey.Key) {
				key.Sign(c)
				c.OwnerReferences[0].UID = "someone-else"
			},
			wantWhy: "do not all name this account",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hooks{}, acct, j)
			key, err := f.ledger.Key(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c := forgedChunk(acct, chunkName(acct.UID, "0", 0))
			tc.chunk(c, key)
			if err := f.c.Create(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			before := testutil.ToFloat64(chunksIgnored.WithLabelValues(ignoredWhy(tc.wantWhy)))
			for range 2 { // the second reconcile reports nothing new
				if _, err := f.reconcile("acct"); err != nil {
					t.Fatal(err)
				}
			}
			ba := f.account(t, "acct")
			if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted); (got == "True Accepted") != (tc.wantAccepted != "") {
				t.Errorf("Accepted = %q, want %q", got, tc.wantAccepted)
			}
			evs := ignoredEvents(f)
			if tc.wantWhy == "" {
				if len(evs) != 0 || ba.Status.Results.IgnoredChunks != 0 {
					t.Errorf("events %q, ignoredChunks %d; want none", evs, ba.Status.Results.IgnoredChunks)
				}
				return
			}
			if len(evs) != 1 || !strings.HasPrefix(evs[0], corev1.EventTypeWarning+" ShardResults acct-uid-0 is not counted: ") ||
				!strings.Contains(evs[0], tc.wantWhy) {
				t.Errorf("ignored events = %q; want one Warning saying %q", evs, tc.wantWhy)
			}
			if ba.Status.Results.IgnoredChunks != 1 {
				t.Errorf("status.results.ignoredChunks = %d, want 1", ba.Status.Results.IgnoredChunks)
			}
			if d := testutil.ToFloat64(chunksIgnored.WithLabelValues(ignoredWhy(tc.wantWhy))) - before; d != 1 {
				t.Errorf("%s grew by %v, want 1", MetricChunksIgnored, d)
			}
			var stored v1alpha1.ShardResults
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(c), &stored); err != nil {
				t.Fatal(err)
			}
			if trusted, err := f.ledger.ChunkTrusted(context.Background(), &stored); err != nil || trusted {
				t.Errorf("ChunkTrusted = %v, %v; the releaser must not trust it", trusted, err)
			}
			if len(f.writesOf("update")) != 0 {
				t.Errorf("chunk writes %v: capture must never touch a chunk it did not record", f.writesOf("update"))
			}
		})
	}
}

// ignoredWhy is the metric label of a case's note.
func ignoredWhy(note string) string {
	switch {
	case note == "":
		return "none"
	case strings.Contains(note, "no signature"):
		return string(ledgerkey.Unsigned)
	case strings.Contains(note, "another key"):
		return string(ledgerkey.OtherKey)
	case strings.Contains(note, "changed"):
		return string(ledgerkey.Tampered)
	}
	return IgnoredNotOwned
}

// TestForgedChunkUnderTheNextNameDoesNotBlockCapture: a forged chunk under the name
// capture would give its first chunk is skipped, the results of the pods are recorded in
// the next continuation, and only they count.
func TestForgedChunkUnderTheNextNameDoesNotBlockCapture(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	pod0 := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj()
	forged := forgedChunk(acct, chunkName(acct.UID, "0", 0))
	forged.Results = forged.Results[1:] // shard B only: j-1 never reported
	f := newFixture(t, hooks{}, acct, j, pod0, forged)
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	var chunkWrites []string
	for _, w := range f.writes {
		if strings.Contains(w, " ShardResults/") {
			chunkWrites = append(chunkWrites, w)
		}
	}
	if diff := cmp.Diff([]string{"create ShardResults/acct-uid-0-1"}, chunkWrites); diff != "" {
		t.Errorf("chunk writes (-want +got):\n%s", diff)
	}
	ba := f.account(t, "acct")
	if got := conditionOf(ba.Status.Conditions, v1alpha1.ConditionAccepted); got == "True Accepted" {
		t.Errorf("Accepted = %q on a forged result for shard B", got)
	}
	if ba.Status.Shards.Accepted != 1 {
		t.Errorf("shards accepted = %d, want 1 (A, recorded by the manager)", ba.Status.Shards.Accepted)
	}
	// The next pod's result joins the manager's chunk, not the forged one.
	pod1 := wrappers.MakeIndexPod(j, "j-1", 1).Succeeded(testNow.Add(-time.Minute), report(t, "B")).Obj()
	if err := f.c.Create(context.Background(), pod1); err != nil {
		t.Fatal(err)
	}
	f.reset()
	if _, err := f.reconcile("acct"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ShardResults/acct-uid-0-1"}, f.writesOf("update")); diff != "" {
		t.Errorf("chunk updates (-want +got):\n%s", diff)
	}
	if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
		t.Errorf("Accepted = %q once both pods are recorded by the manager", got)
	}
}

// TestRecordedChunksVerifyAcrossRestarts: a new Ledger (a restarted manager, another
// replica) reading the same key Secret verifies the chunks the first one signed; a key
// Secret replaced in between makes them untrusted, and reported.
func TestRecordedChunksVerifyAcrossRestarts(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	pod0 := wrappers.MakeIndexPod(j, "j-0", 0).Succeeded(testNow.Add(-2*time.Minute), report(t, "A")).Obj()
	pod1 := wrappers.MakeIndexPod(j, "j-1", 1).Succeeded(testNow.Add(-time.Minute), report(t, "B")).Obj()
	for _, replaced := range []bool{false, true} {
		t.Run(map[bool]string{false: "same Secret", true: "Secret replaced"}[replaced], func(t *testing.T) {
			f := newFixture(t, hooks{}, acct, j, pod0, pod1)
			src := ledgerkey.Source{Reader: f.c, Writer: f.c, Namespace: "batchledger-system", Name: ledgerkey.DefaultSecretName,
				Now: func() time.Time { return testNow.Add(-time.Hour) }}
			run := func() {
				t.Helper()
				r := f.reconciler()
				r.Ledger = &Ledger{Source: src} // a new process each time
				if _, err := r.Reconcile(context.Background(), reconcileRequest("acct")); err != nil {
					t.Fatal(err)
				}
			}
			run()
			if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted); got != "True Accepted" {
				t.Fatalf("Accepted = %q after the first capture", got)
			}
			// The pods are released and gone: only the chunk holds their results.
			for _, p := range []*corev1.Pod{pod0, pod1} {
				if err := f.c.Delete(context.Background(), p.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			if replaced {
				if err := f.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name}}); err != nil {
					t.Fatal(err)
				}
			}
			f.reset()
			run()
			got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted)
			if evs := ignoredEvents(f); replaced != (len(evs) == 1) || (got == "True Accepted") == replaced {
				t.Errorf("after a restart: Accepted = %q, ignored events %q (key replaced: %v)", got, evs, replaced)
			}
			if len(f.writesOf("update")) != 0 && !replaced {
				t.Errorf("chunk writes after a restart: %v", f.writesOf("update"))
			}
		})
	}
}

// TestLegacyUnsignedChunks: a chunk without a signature is an earlier version's when it
// was created before the key's legacy cutoff: it counts, and capture signs it at once; one
// created after the cutoff was written by no manager that signs, and is ignored.
func TestLegacyUnsignedChunks(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	cutoff := testNow.Add(-time.Hour)
	for _, tc := range []struct {
		name        string
		created     time.Time
		wantCounted bool
	}{
		{"created before the key: an earlier version's", cutoff.Add(-time.Minute), true},
		{"created in the second the key was made", cutoff, false},
		{"created after the key", cutoff.Add(time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legacy := forgedChunk(acct, chunkName(acct.UID, "0", 0))
			legacy.CreationTimestamp = metav1.NewTime(tc.created)
			key, b, err := ledgerkey.Generate(cutoff)
			if err != nil {
				t.Fatal(err)
			}
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "batchledger-system", Name: ledgerkey.DefaultSecretName},
				Data: map[string][]byte{ledgerkey.DataKey: b, ledgerkey.DataLegacyBefore: []byte(cutoff.Format(time.RFC3339))}}
			f := newFixture(t, hooks{}, acct, j, legacy, secret)
			f.ledger.Source = ledgerkey.Source{Reader: f.c, Writer: f.c, Namespace: secret.Namespace, Name: secret.Name}
			if _, err := f.reconcile("acct"); err != nil {
				t.Fatal(err)
			}
			got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted)
			if (got == "True Accepted") != tc.wantCounted {
				t.Errorf("Accepted = %q; counted want %v", got, tc.wantCounted)
			}
			var stored v1alpha1.ShardResults
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(legacy), &stored); err != nil {
				t.Fatal(err)
			}
			if signed := key.Verify(&stored) == ledgerkey.Signed; signed != tc.wantCounted {
				t.Errorf("stored chunk signed = %v, want %v (a trusted legacy chunk is signed at once, another never touched)", signed, tc.wantCounted)
			}
			if evs := ignoredEvents(f); (len(evs) == 0) != tc.wantCounted {
				t.Errorf("ignored events %q", evs)
			}
		})
	}
}

// TestAGeneratedKeyCountsNoUnsignedChunk: the key the manager generates into a Secret that
// held none counts no unsigned chunk, whenever it was created: no release wrote one. Not
// when the manager first leads hours after the install created the Secret empty, nor
// when it was missing, nor when it was deleted and created again: a chunk written around
// the admission policy and ignored under the former key stays ignored (and reported), and
// the pod releaser does not trust it either. A key already there keeps its cutoff.
func TestAGeneratedKeyCountsNoUnsignedChunk(t *testing.T) {
	j := jobJ(v1alpha1.ScopeResults).Completed("0-1", 2).Complete(testNow).Obj()
	acct := accountOfJ().RequireResults("result.valid == result.records").Obj()
	meta := metav1.ObjectMeta{Namespace: "batchledger-system", Name: ledgerkey.DefaultSecretName}
	_, b, err := ledgerkey.Generate(testNow.Add(-3 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	stamp := func(t time.Time) []byte { return []byte(t.Format(time.RFC3339)) }
	for _, tc := range []struct {
		name string
		// secret is the key Secret when the manager first reads it; recreated, when set,
		// replaces it (deleted, created again empty by the install) before the reconcile
		// that is judged, which a new process runs.
		secret      *corev1.Secret
		recreated   bool
		wantCounted bool
	}{
		{name: "created empty by the install, first led an hour after the chunk", secret: &corev1.Secret{ObjectMeta: meta}},
		{name: "marked at the install, first led an hour after the chunk",
			secret: &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{ledgerkey.DataIndexPodsSince: stamp(ledgerkey.MarkedFromTheStart)}}},
		{name: "missing: created by the manager"},
		{name: "deleted and created again after the chunk was ignored under the former key", secret: &corev1.Secret{ObjectMeta: meta,
			Data: map[string][]byte{ledgerkey.DataKey: b, ledgerkey.DataLegacyBefore: stamp(testNow.Add(-3 * time.Hour)),
				ledgerkey.DataIndexPodsSince: stamp(ledgerkey.MarkedFromTheStart)}}, recreated: true},
		{name: "an earlier key whose cutoff is after the chunk: counted", secret: &corev1.Secret{ObjectMeta: meta,
			Data: map[string][]byte{ledgerkey.DataKey: b, ledgerkey.DataLegacyBefore: stamp(testNow.Add(-time.Minute)),
				ledgerkey.DataIndexPodsSince: stamp(testNow.Add(-time.Minute))}}, wantCounted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged := forgedChunk(acct, chunkName(acct.UID, "0", 0))
			forged.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
			objs := []client.Object{acct, j, forged}
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			f := newFixture(t, hooks{}, objs...)
			src := ledgerkey.Source{Reader: f.c, Writer: f.c, Namespace: meta.Namespace, Name: meta.Name, Now: func() time.Time { return testNow }}
			run := func() *Ledger {
				t.Helper()
				r := f.reconciler()
				r.Ledger = &Ledger{Source: src} // a new process each time
				if _, err := r.Reconcile(context.Background(), reconcileRequest("acct")); err != nil {
					t.Fatal(err)
				}
				return r.Ledger
			}
			if tc.recreated {
				run()
				if got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted); got == "True Accepted" {
					t.Fatalf("Accepted under the former key on an unsigned chunk created after its cutoff")
				}
				if err := f.c.Delete(context.Background(), tc.secret.DeepCopy()); err != nil {
					t.Fatal(err)
				}
				if err := f.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: meta.Namespace, Name: meta.Name}}); err != nil {
					t.Fatal(err)
				}
				f.reset()
			}
			l := run()
			got := conditionOf(f.account(t, "acct").Status.Conditions, v1alpha1.ConditionAccepted)
			if (got == "True Accepted") != tc.wantCounted {
				t.Errorf("Accepted = %q; counted want %v", got, tc.wantCounted)
			}
			if n := f.account(t, "acct").Status.Results.IgnoredChunks; (n == 1) == tc.wantCounted {
				t.Errorf("status.results.ignoredChunks = %d; counted want %v", n, tc.wantCounted)
			}
			if evs := ignoredEvents(f); (len(evs) == 1) == tc.wantCounted {
				t.Errorf("ignored events %q; counted want %v", evs, tc.wantCounted)
			}
			var stored v1alpha1.ShardResults
			if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(forged), &stored); err != nil {
				t.Fatal(err)
			}
			if ok, err := l.ChunkTrusted(context.Background(), &stored); err != nil || ok != tc.wantCounted {
				t.Errorf("the pod releaser trusts the chunk: %v, %v; counted want %v", ok, err, tc.wantCounted)
			}
		})
	}
}

// TestVerdictsAreCachedPerResourceVersion: a chunk is verified once per resourceVersion:
// an unchanged chunk is not hashed again (here: content changed behind the cache's back,
// under the same resourceVersion, keeps its verdict), a new resourceVersion is.
func TestVerdictsAreCachedPerResourceVersion(t *testing.T) {
	acct := accountOfJ().Obj()
	var l Ledger
	key, err := l.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := forgedChunk(acct, chunkName(acct.UID, "0", 0))
	c.UID, c.ResourceVersion = "chunk-uid", "7"
	key.Sign(c)
	if ok, err := l.ChunkTrusted(context.Background(), c); err != nil || !ok {
		t.Fatalf("ChunkTrusted = %v, %v on the manager's chunk", ok, err)
	}
	c.Results[0].Valid = 0
	if ok, _ := l.ChunkTrusted(context.Background(), c); !ok {
		t.Errorf("the same resourceVersion was verified again")
	}
	c.ResourceVersion = "8"
	if ok, _ := l.ChunkTrusted(context.Background(), c); ok {
		t.Errorf("a new resourceVersion with changed content is still trusted")
	}
}

func reconcileRequest(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}}
}
