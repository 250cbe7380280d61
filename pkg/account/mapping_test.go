package account

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestCompileProblems pins one reason per way a mapping can fail statically.
func TestCompileProblems(t *testing.T) {
	cases := []struct {
		name       string
		spec       *v1alpha1.BatchAccountSpec
		wantReason string // "" means valid
		wantText   string
	}{
		{
			name: "partition by names",
			spec: makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecObj(),
		},
		{
			name: "partition over two jobs, out of order shards",
			spec: makeSpec("A", "B", "C", "D").AssignJob("j", "0,1", "B", "A").AssignJob("k", "0,1", "D", "C").SpecObj(),
		},
		{
			name: "compact population by ordinals",
			spec: makeCompactSpec("shard-", 100).AssignJobOrdinals("j", "0-49", "0-49").AssignJobOrdinals("k", "0-49", "50-99").SpecObj(),
		},
		{
			name:       "every index to shard A",
			spec:       makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "A", "A", "A").SpecObj(),
			wantReason: v1alpha1.ReasonDuplicateShard,
			wantText:   "shard A is assigned twice: job j index 0 (assignments[0]) and job j index 1 (assignments[0])",
		},
		{
			name:       "shard never assigned",
			spec:       makeSpec("A", "B", "C", "D").AssignJob("j", "0-2", "A", "B", "C").SpecObj(),
			wantReason: v1alpha1.ReasonUnassignedShard,
			wantText:   "1 of 4 declared shards are assigned to no index: D",
		},
		{
			name:       "unknown shard name",
			spec:       makeSpec("A", "B").AssignJob("j", "0-1", "A", "Z").SpecObj(),
			wantReason: v1alpha1.ReasonUnknownShard,
			wantText:   `maps onto shard "Z", which spec.shards does not declare`,
		},
		{
			name:       "ordinal beyond the population",
			spec:       makeCompactSpec("s", 4).AssignJobOrdinals("j", "0-4", "0-4").SpecObj(),
			wantReason: v1alpha1.ReasonUnknownShard,
			wantText:   "reaches ordinal 4; spec.shards declares 4 shards (0-3)",
		},
		{
			name:       "more indexes than shards",
			spec:       makeSpec("A", "B", "C", "D").AssignJob("j", "0-4", "A", "B", "C", "D").SpecObj(),
			wantReason: v1alpha1.ReasonShardCountMismatch,
			wantText:   "maps 5 indexes (0-4) onto 4 shards",
		},
		{
			name:       "malformed indexes",
			spec:       makeSpec("A").AssignJob("j", "3-1", "A").SpecObj(),
			wantReason: v1alpha1.ReasonMalformedIndexes,
		},
		{
			name:       "same index twice",
			spec:       makeSpec("A", "B").AssignJob("j", "0", "A").AssignJob("j", "0", "B").SpecObj(),
			wantReason: v1alpha1.ReasonDuplicateIndex,
			wantText:   "job j index 0 is assigned twice (assignments[0] and assignments[1])",
		},
		{
			name:       "duplicate declared name",
			spec:       makeSpec("A", "A").AssignJob("j", "0", "A").SpecObj(),
			wantReason: v1alpha1.ReasonDuplicateShardName,
		},
		{
			name:       "no shards",
			spec:       makeSpec().AssignJob("j", "0", "A").SpecObj(),
			wantReason: v1alpha1.ReasonNoShards,
		},
		{
			name: "target in another namespace",
			spec: makeSpec("A").AssignJob("j", "0", "A").
				Target(v1alpha1.TargetRef{Job: "j", Namespace: "other"}).SpecObj(),
			wantReason: v1alpha1.ReasonCrossNamespaceTarget,
			wantText:   `names a target in namespace "other"; targets must be in the account's namespace "ml-team"`,
		},
		{
			name:       "target naming job and jobSet",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{Job: "j", JobSet: "s", ReplicatedJob: "w"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
		},
		{
			name:       "jobSet without replicatedJob",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{JobSet: "s"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
		},
		{
			name:       "job name with an underscore and capitals",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{Job: "Train_Job"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
			wantText:   `assignments[0].target.job "Train_Job" can name no Job: a lowercase RFC 1123 subdomain`,
		},
		{
			name:       "job name with a slash",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{Job: "a/b"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
			wantText:   `target.job "a/b" can name no Job`,
		},
		{
			name:       "jobSet name that is no object name",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{JobSet: "Train", ReplicatedJob: "w"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
			wantText:   `target.jobSet "Train" can name no JobSet`,
		},
		{
			name:       "trainJob name that is no object name",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{TrainJob: "-t", ReplicatedJob: "node"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
			wantText:   `target.trainJob "-t" can name no TrainJob`,
		},
		{
			name:       "replicatedJob that no child Job name can hold",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "Workers!"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
			wantText:   `assignments[0].target.replicatedJob "Workers!" can name no child Job: JobSet would name it "train-Workers!-0"`,
		},
		{
			name: "jobSet and replicatedJob too long for their child Job's name",
			spec: makeSpec("A").AssignJob("j", "0", "A").
				Target(v1alpha1.TargetRef{JobSet: strings.Repeat("s", 40), ReplicatedJob: strings.Repeat("w", 30)}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
			wantText:   "can name no child Job",
		},
		{
			name: "jobSet child Job of a replicatedJob starting with a digit",
			spec: makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{JobSet: "train", ReplicatedJob: "0w", JobIndex: ptr.To[int32](3)}).SpecObj(),
		},
		{
			name: "job name that is a dotted subdomain",
			spec: makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{Job: "train.v2"}).SpecObj(),
		},
		{
			name:       "namespace that is no namespace name",
			spec:       makeSpec("A").AssignJob("j", "0", "A").Target(v1alpha1.TargetRef{Job: "j", Namespace: "ML_Team"}).SpecObj(),
			wantReason: v1alpha1.ReasonInvalidTarget,
			wantText:   `assignments[0].target.namespace "ML_Team" can name no namespace`,
		},
		{
			name:       "repair of a shard no original assignment has",
			spec:       makeSpec("A", "B").AssignJob("j", "0", "A").Repair("r", "0", "B").SpecObj(),
			wantReason: v1alpha1.ReasonUnassignedShard,
		},
		{
			name: "repair adds an identity to an assigned shard",
			spec: makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").Repair("r", "0", "B").SpecObj(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Compile("ml-team", tc.spec)
			if tc.wantReason == "" {
				if len(m.Problems) != 0 {
					t.Fatalf("want valid, got %+v", m.Problems)
				}
				return
			}
			if len(m.Problems) == 0 {
				t.Fatalf("want %s, mapping accepted", tc.wantReason)
			}
			var found *Problem
			for i := range m.Problems {
				if m.Problems[i].Reason == tc.wantReason {
					found = &m.Problems[i]
				}
			}
			if found == nil {
				t.Fatalf("want reason %s, got %+v", tc.wantReason, m.Problems)
			}
			if !strings.Contains(found.Message, tc.wantText) {
				t.Errorf("message %q lacks %q", found.Message, tc.wantText)
			}
		})
	}
}

// TestObservationProblems pins the mapping problems only a Job observation reveals.
func TestObservationProblems(t *testing.T) {
	cases := []struct {
		name       string
		spec       *v1alpha1.BatchAccountSpec
		job        *wrappers.JobWrapper
		wantReason string
		wantText   string
	}{
		{
			name:       "required index without a shard",
			spec:       makeSpec("A", "B", "C").AssignJob("j", "0-2", "A", "B", "C").SpecObj(),
			job:        makeJob("j", "u", 4),
			wantReason: v1alpha1.ReasonUnmappedIndexes,
			wantText:   "job j requires indexes 0-3 but the mapping assigns no shard to 3",
		},
		{
			name:       "mapped index beyond completions",
			spec:       makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "A", "B", "C", "D").SpecObj(),
			job:        makeJob("j", "u", 3),
			wantReason: v1alpha1.ReasonIndexOutOfRange,
			wantText:   "job j has 3 completions (indexes 0-2) but the mapping assigns indexes 3",
		},
		{
			name:       "mapped index beyond one completion",
			spec:       makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj(),
			job:        makeJob("j", "u", 1),
			wantReason: v1alpha1.ReasonIndexOutOfRange,
			wantText:   "job j has 1 completion (index 0) but the mapping assigns indexes 1",
		},
		{
			// completions: 0 is valid for an Indexed Job, which then runs nothing.
			name:       "mapped index of a Job of no completions",
			spec:       makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj(),
			job:        makeJob("j", "u", 0),
			wantReason: v1alpha1.ReasonIndexOutOfRange,
			wantText:   "job j has 0 completions (no index) but the mapping assigns indexes 0,1",
		},
		{
			name:       "non-indexed job",
			spec:       makeSpec("A").AssignJob("j", "0", "A").SpecObj(),
			job:        makeJob("j", "u", 1).CompletionMode(batchv1.NonIndexedCompletion),
			wantReason: v1alpha1.ReasonNotIndexed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, tc.spec, nil, map[string]Observation{"job/j": {Job: tc.job.Facts()}}).Status
			wantCond(t, st, v1alpha1.ConditionAssignmentValid, "False", tc.wantReason, "")
			wantCond(t, st, v1alpha1.ConditionShardsCovered, "False", v1alpha1.ReasonAssignmentInvalid, "")
			if len(st.Targets[0].Problems) == 0 || !strings.Contains(st.Targets[0].Problems[0], tc.wantText) {
				t.Errorf("target problems %q lack %q", st.Targets[0].Problems, tc.wantText)
			}
		})
	}
}

func TestShardsDescribeAndOrdinal(t *testing.T) {
	m := Compile("ns", makeCompactSpec("shard-", 100000).AssignJobOrdinals("j", "0-99999", "0-99999").SpecObj())
	if o, ok := m.Shards.Ordinal("shard-99999"); !ok || o != 99999 {
		t.Errorf("Ordinal(shard-99999) = %d, %v", o, ok)
	}
	for _, bad := range []string{"shard-100000", "shard-01", "shard-", "x-1", "shard--1"} {
		if _, ok := m.Shards.Ordinal(bad); ok {
			t.Errorf("Ordinal(%q) accepted", bad)
		}
	}
	if got, want := m.Shards.Describe(mustParse(t, "0,2,3,5-9,20-30"), 2), "shard-0, shard-2, shard-3, … (+16 more)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if len(m.Runs) != 1 || m.Runs[0].Length != 100000 {
		t.Errorf("a compact mapping must compile to one run, got %d", len(m.Runs))
	}
	n := Compile("ns", makeSpec("A", "B", "C", "D").AssignJob("j", "0-3", "D", "C", "B", "A").SpecObj())
	if len(n.Runs) != 4 {
		t.Errorf("reversed mapping compiles to %d runs, want 4", len(n.Runs))
	}
	if o, ok := n.ShardOf("job/j", 0); !ok || n.Shards.Name(o) != "D" {
		t.Errorf("ShardOf(j,0) = %d", o)
	}
	_ = ptr.To(0)
}
