package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

func withVerdicts(name string, covered, accepted metav1.Condition) *v1alpha1.BatchAccount {
	ba := wrappers.MakeBatchAccount(name, "ns").Obj()
	ba.Status.Conditions = []metav1.Condition{covered, accepted}
	return ba
}

// TestWorkloadConditionsSpeakForEveryAccount: the Workload's two conditions aggregate the
// verdicts of every account naming its Jobs (True only when all are), name each account,
// and stay bounded however many accounts there are.
func TestWorkloadConditionsSpeakForEveryAccount(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	wl := wrappers.MakeWorkload("job-j", "ns").Generation(3).Obj()
	covered := cond(v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "2/2 shards covered")
	accepted := cond(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "2/2 shards accepted")
	pending := cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, "waiting for results of B")
	done := withVerdicts("a-done", covered, accepted)
	waiting := withVerdicts("b-waiting", covered, pending)

	t.Run("one account: its own verdict", func(t *testing.T) {
		got := desiredWorkloadConditions(wl, []*v1alpha1.BatchAccount{done}, now)
		want := []metav1.Condition{
			{Type: v1alpha1.WorkloadConditionShardsCovered, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllShardsCovered, Message: "BatchAccount a-done: 2/2 shards covered", ObservedGeneration: 3},
			{Type: v1alpha1.WorkloadConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAccepted, Message: "BatchAccount a-done: 2/2 shards accepted", ObservedGeneration: 3},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("conditions (-want +got):\n%s", diff)
		}
	})
	t.Run("two accounts, one still waiting: False, whoever wrote last", func(t *testing.T) {
		for _, order := range [][]*v1alpha1.BatchAccount{{done, waiting}, {waiting, done}} {
			got := desiredWorkloadConditions(wl, order, now)
			acc := got[1]
			if acc.Status != metav1.ConditionFalse || acc.Reason != v1alpha1.ReasonResultsPending ||
				acc.Message != "2 accounts; BatchAccount a-done: 2/2 shards accepted; BatchAccount b-waiting: waiting for results of B" {
				t.Errorf("Accepted = %s %s %q", acc.Status, acc.Reason, acc.Message)
			}
			if got[0].Status != metav1.ConditionTrue || got[0].Reason != v1alpha1.ReasonAllShardsCovered {
				t.Errorf("ShardsCovered = %s %s", got[0].Status, got[0].Reason)
			}
		}
	})
	t.Run("many accounts: bounded message", func(t *testing.T) {
		var many []*v1alpha1.BatchAccount
		long := strings.Repeat("x", 30000)
		for i := range 200 {
			many = append(many, withVerdicts(fmt.Sprintf("acct-%03d", i), covered, cond(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonResultsPending, long)))
		}
		for _, c := range desiredWorkloadConditions(wl, many, now) {
			if len(c.Message) > 32768 {
				t.Errorf("%s message is %d bytes", c.Type, len(c.Message))
			}
			if !strings.HasSuffix(c.Message, "; and 192 more") || !strings.HasPrefix(c.Message, "200 accounts; ") {
				t.Errorf("%s message does not count the accounts: %.80q...%q", c.Type, c.Message, c.Message[len(c.Message)-20:])
			}
		}
	})
}
