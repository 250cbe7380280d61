package batchledger

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/e2e/framework"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/ledgerkey"
)

// TestForgedResultsIgnored: the cluster admin creates a ShardResults chunk that names the
// account by label, accountUID and controller ownerReference, with an accepted result for
// every shard, while one shard's pod still runs. An admission policy may refuse it (then
// that refusal is the defence); where the admin may write it, the controller does not
// count it (it carries no signature of the manager's key): the account stays at its real
// verdict, a Warning UnrecordedResultsIgnored names the chunk and
// status.results.ignoredChunks counts it, and the pod's real result still makes the
// account Accepted.
func TestForgedResultsIgnored(t *testing.T) {
	f := framework.New(t)
	resultsJob(t, f, "signed", "A", "B")
	job := jobStatus(t, f, "j")
	framework.RunningPods(t, job, 2)
	framework.FinishIndexPod(t, job, 0, 0, report(t, "A", "m-2026-11", "sha256:A"))
	ba := waitAccount(t, f, "signed", "shard A accepted", func(ba *v1alpha1.BatchAccount) bool { return ba.Status.Shards.Accepted == 1 })

	forged := &v1alpha1.ShardResults{
		ObjectMeta: metav1.ObjectMeta{
			// The next continuation of the first span: capture must step over it.
			Name: fmt.Sprintf("%s-0-1", ba.UID), Namespace: f.Namespace,
			Labels:          v1alpha1.ChunkLabels(ba),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ba, v1alpha1.GroupVersion.WithKind("BatchAccount"))},
		},
		Account: ba.Name, AccountUID: ba.UID, FirstOrdinal: 0,
	}
	for i, shard := range []string{"A", "B"} {
		forged.Results = append(forged.Results, v1alpha1.RecordedResult{Ordinal: int32(i), Shard: shard, Target: "job/j",
			JobUID: job.UID, Index: int32(i), Pod: fmt.Sprintf("forged-%d", i), PodUID: types.UID("forged-" + shard),
			InputRevision: "D", ModelRevision: "m-2026-11", Output: "s3://batches/ij245/" + shard, Digest: "sha256:" + shard,
			Records: 1000, Valid: 1000, RecordedAt: metav1.Now(), Sequence: int64(100 + i)})
	}
	if err := f.Client.Create(f.Ctx, forged); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			// An admission policy keeps chunks to the manager, even for the admin.
			t.Logf("the forged chunk was refused at admission: %v", err)
			var chunks v1alpha1.ShardResultsList
			if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
				t.Fatal(err)
			}
			for _, c := range chunks.Items {
				if c.Name == forged.Name {
					t.Fatalf("refused, yet chunk %s exists", c.Name)
				}
			}
			return
		}
		t.Fatalf("create the forged chunk: %v", err)
	}
	t.Logf("the admin's forged chunk %s was admitted: the controller must not count it", forged.Name)

	ba = waitAccount(t, f, "signed", "the forged chunk counted as ignored", func(ba *v1alpha1.BatchAccount) bool {
		return ba.Status.Results.IgnoredChunks == 1
	})
	if ok, state := condIs(ba.Status.Conditions, v1alpha1.ConditionAccepted, metav1.ConditionTrue, ""); ok || ba.Status.Shards.Accepted != 1 {
		t.Errorf("with the forged chunk: %d shards accepted, %s; want 1 and not Accepted", ba.Status.Shards.Accepted, state)
	}
	framework.Eventually(t, framework.DefaultTimeout, "an UnrecordedResultsIgnored Warning on the account", func() (bool, string, error) {
		var evs corev1.EventList
		if err := f.Client.List(f.Ctx, &evs, client.InNamespace(f.Namespace)); err != nil {
			return false, "", err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.UID == ba.UID && ev.Reason == v1alpha1.EventReasonUnrecordedResultsIgnored {
				if ev.Type != corev1.EventTypeWarning || ev.Series != nil {
					return false, "", fmt.Errorf("event %s %s repeated %v: %s", ev.Type, ev.Reason, ev.Series, ev.Message)
				}
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events, none %s", len(evs.Items), v1alpha1.EventReasonUnrecordedResultsIgnored), nil
	})
	// The forged chunk is never appended to nor signed: the manager does not touch it.
	time.Sleep(2 * time.Second)
	var stored v1alpha1.ShardResults
	if err := f.Client.Get(f.Ctx, client.ObjectKeyFromObject(forged), &stored); err != nil {
		t.Fatal(err)
	}
	if _, signed := stored.Annotations[ledgerkey.AnnotationSignature]; signed || len(stored.Results) != 2 {
		t.Errorf("the forged chunk was changed: signed %v, %d results", signed, len(stored.Results))
	}

	// Shard B's real result is recorded by the manager, and only then is the batch Accepted.
	framework.FinishIndexPod(t, job, 1, 0, report(t, "B", "m-2026-11", "sha256:B"))
	waitAccountCondition(t, f, "signed", v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	var chunks v1alpha1.ShardResultsList
	if err := f.Client.List(f.Ctx, &chunks, client.InNamespace(f.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks.Items {
		if c.Name == forged.Name {
			continue
		}
		if c.Annotations[ledgerkey.AnnotationSignature] == "" {
			t.Errorf("the manager's chunk %s carries no signature", c.Name)
		}
		for _, r := range c.Results {
			if r.Sequence >= 100 {
				t.Errorf("a forged result reached the manager's chunk %s: %+v", c.Name, r)
			}
		}
	}
}
