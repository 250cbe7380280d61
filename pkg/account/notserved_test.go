package account

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// jobSetAPI is the API a JobSet target needs, as the controller names it.
const jobSetAPI = "jobset.x-k8s.io/v1alpha2 JobSet"

// TestAPINotServed: a JobSet target in a cluster that does not serve JobSet cannot
// exist. The account says so (APINotServed, on the target and in the conditions), not
// that it waits for the JobSet; once the API is served the same target is an ordinary
// wait for its JobSet again (TargetsNotFound).
func TestAPINotServed(t *testing.T) {
	spec := makeCompactSpec("s", 4).AssignJobSet("train", "workers", 0, "0-1", "0-1").
		AssignJobSet("train", "workers", 1, "0-1", "2-3").SpecObj()
	notServed := map[string]Observation{
		"jobset/train/workers/0": {APINotServed: jobSetAPI},
		"jobset/train/workers/1": {APINotServed: jobSetAPI},
	}
	st := step(t, spec, nil, notServed).Status
	why := jobSetAPI + " is not served by this cluster: install it, and batchledger starts following it then"
	wantCond(t, st, v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonAPINotServed,
		"jobset train workers[0], jobset train workers[1] cannot exist: "+why)
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonAPINotServed,
		"0/4 shards covered; missing s0, s1 = jobset train workers[0] indexes 0,1, s2, s3 = jobset train workers[1] indexes 0,1; "+
			"jobset train workers[0], jobset train workers[1] cannot exist: "+why)
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionTrue, v1alpha1.ReasonValid, "")
	for _, ts := range st.Targets {
		if ts.Found || !slices.Equal(ts.Problems, []string{why}) {
			t.Errorf("target %s: found %v, problems %q; want not found with %q", ts.Name, ts.Found, ts.Problems, why)
		}
	}
	if a := findCond(st, v1alpha1.ConditionAccepted); a == nil || a.Status != metav1.ConditionFalse {
		t.Errorf("Accepted = %+v, want False", a)
	}

	// JobSet installed: the targets are an expected wait for their JobSet, and the
	// problem is gone.
	st = step(t, spec, &st, map[string]Observation{}).Status
	wantCond(t, st, v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound,
		"waiting for jobset train workers[0], jobset train workers[1] to exist")
	wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonTargetsNotFound, "")
	for _, ts := range st.Targets {
		if len(ts.Problems) > 0 {
			t.Errorf("target %s keeps problems %q once its API is served", ts.Name, ts.Problems)
		}
	}
}

// TestAPINotServedBesideAJob: a plain Job beside a JobSet target whose API is not served
// is accounted as ever; the JobSet target's shards are missing, and the reason says why
// no wait will end it.
func TestAPINotServedBesideAJob(t *testing.T) {
	spec := makeCompactSpec("s", 4).AssignJobOrdinals("j", "0-1", "0-1").
		AssignJobSet("train", "workers", 0, "0-1", "2-3").SpecObj()
	j := makeJob("j", "uid-j", 2).Completed("0-1", 2).Complete(jobCondAt)
	st := step(t, spec, nil, map[string]Observation{
		"job/j":                  {Job: j.Facts(), PodsListed: true},
		"jobset/train/workers/0": {APINotServed: jobSetAPI},
	}).Status
	if st.Shards.Covered != 2 {
		t.Errorf("covered %d, want the Job's 2", st.Shards.Covered)
	}
	wantCond(t, st, v1alpha1.ConditionAdmitted, metav1.ConditionFalse, v1alpha1.ReasonAPINotServed, "")
	c := findCond(st, v1alpha1.ConditionShardsCovered)
	if c == nil || c.Reason != v1alpha1.ReasonShardsMissing || !strings.Contains(c.Message, "jobset train workers[0] cannot exist: "+jobSetAPI+" is not served") {
		t.Errorf("ShardsCovered = %+v, want ShardsMissing naming the API not served", c)
	}

	// A found target's observation never reports its API as not served.
	if got := (Observation{Job: j.Facts(), APINotServed: jobSetAPI}).notServed(); got != "" {
		t.Errorf("notServed of a found target = %q, want none", got)
	}
}

func findCond(st v1alpha1.BatchAccountStatus, typ string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}
