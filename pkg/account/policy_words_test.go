package account

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestSuccessPolicyWords: the words for a Job's own criterion say what the Job
// controller accepts. A rule with both succeededIndexes and succeededCount is met by
// that many of those indexes, not by all of them.
func TestSuccessPolicyWords(t *testing.T) {
	cases := []struct {
		name  string
		rules []batchv1.SuccessPolicyRule
		want  string
	}{
		{name: "indexes", rules: []batchv1.SuccessPolicyRule{wrappers.SucceededIndexes("0,2")}, want: "succeeds when indexes 0,2 succeeded"},
		{name: "count", rules: []batchv1.SuccessPolicyRule{wrappers.SucceededCount(6)}, want: "succeeds when 6 indexes succeeded"},
		{name: "count of one", rules: []batchv1.SuccessPolicyRule{wrappers.SucceededCount(1)}, want: "succeeds when 1 index succeeded"},
		{
			name:  "count within indexes",
			rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptrTo("0-3"), SucceededCount: ptrTo[int32](2)}},
			want:  "succeeds when 2 of indexes 0-3 succeeded",
		},
		{
			name:  "two rules",
			rules: []batchv1.SuccessPolicyRule{wrappers.SucceededIndexes("0"), {SucceededIndexes: ptrTo("4-7"), SucceededCount: ptrTo[int32](1)}},
			want:  "succeeds when indexes 0 succeeded, or when 1 of indexes 4-7 succeeded",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := readJob(makeJob("j", "u", 8).SuccessPolicy(tc.rules...).Facts())
			if f.successPolicy != tc.want {
				t.Errorf("successPolicy = %q, want %q", f.successPolicy, tc.want)
			}
			// Only a single rule of indexes alone fixes the population the Job requires.
			want := "0-7"
			if tc.name == "indexes" {
				want = "0,2"
			}
			if f.required.String() != want {
				t.Errorf("required = %s, want %s", f.required, want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestSuccessCriteriaMetWithShardsMissing: once the Job controller records
// SuccessCriteriaMet by a successPolicy, the Job runs no further index (it terminates
// the rest) even before it records Complete: ShardsCovered says its criterion was met
// with shards not covered, as it does once the Job is Complete.
func TestSuccessCriteriaMetWithShardsMissing(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
	met := func() *wrappers.JobWrapper {
		return makeJob("j", "uid-j", 2).SuccessPolicy(wrappers.SucceededIndexes("0")).Completed("0", 1).
			Condition(batchv1.JobSuccessCriteriaMet, "SuccessPolicy", jobCondAt)
	}
	cases := []struct {
		name string
		job  *wrappers.JobWrapper
		want string
	}{
		{name: "SuccessCriteriaMet", job: met(),
			want: "1/2 shards covered; missing B = job j index 1; job j met its successPolicy (succeeds when indexes 0 succeeded) with shards not covered"},
		{name: "then Complete", job: met().Condition(batchv1.JobComplete, "SuccessPolicy", jobCondAt),
			want: "1/2 shards covered; missing B = job j index 1; job j succeeded by its successPolicy (succeeds when indexes 0 succeeded) with shards not covered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, nil, map[string]Observation{"job/j": {Job: tc.job.Facts()}}).Status
			wantCond(t, st, "ShardsCovered", "False", "ShardsMissing", tc.want)
		})
	}
}
