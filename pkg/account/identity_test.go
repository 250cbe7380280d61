package account

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// childRef is the JobSet target of child jobIndex of JobSet tw's replicatedJob w.
func childRef(jobIndex int32) v1alpha1.TargetRef {
	return v1alpha1.TargetRef{JobSet: "tw", ReplicatedJob: "w", JobIndex: ptr.To(jobIndex)}
}

const (
	byName  = "job/tw-w-0"
	asChild = "jobset/tw/w/0"
)

// TestOneIdentityIsOneShardHoweverSpelled: two targets that reach the same Job (by its
// name, and as its JobSet's child) claim each index both map twice, whatever the
// assignments are (original or repair) and whichever shards they name. The mapping is
// invalid (DuplicateIndex, naming both targets, their assignments, the Job's UID and the
// indexes); the shared identities cover no shard and their results stand for none. The
// same target spelled twice stays the static DuplicateIndex it always was, and distinct
// Jobs, repairs included, are no duplicate.
func TestOneIdentityIsOneShardHoweverSpelled(t *testing.T) {
	child := makeJob("tw-w-0", "uid-tw-w-0", 1).Completed("0", 1).Complete(jobCondAt)
	child2 := makeJob("tw-w-0", "uid-tw-w-0", 2).Completed("0-1", 2).Complete(jobCondAt)
	other := makeJob("tw-w-1", "uid-tw-w-1", 1).Completed("0", 1).Complete(jobCondAt)
	repairJob := makeJob("tw-repair", "uid-repair", 1).Completed("0", 1).Complete(jobCondAt)
	cases := []struct {
		name    string
		spec    *wrappers.BatchAccountWrapper
		obs     map[string]Observation
		results []Result

		wantReason   string // AssignmentValid's reason
		wantText     []string
		wantCovered  int32
		wantAccepted int32 // results accepted, when the spec requires them
		wantRejected string
		// wantTargetProblem: the targets (by position) whose status names the duplicate.
		wantTargetProblem []int
	}{
		{
			name:       "by name and as the JobSet's child, onto two shards",
			spec:       makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(0)),
			obs:        map[string]Observation{byName: {Job: child.Facts()}, asChild: {Job: child.Facts()}},
			wantReason: v1alpha1.ReasonDuplicateIndex,
			wantText: []string{"job tw-w-0 (assignments[0]) and jobset tw w[0] (assignments[1]) are the same Job (UID uid-tw-w-0): index 0 assigned twice",
				"so it counts for neither"},
			wantTargetProblem: []int{0, 1},
		},
		{
			name:              "the shared identity's result stands for no shard",
			spec:              makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(0)).RequireResults(""),
			obs:               map[string]Observation{byName: {Job: child.Facts()}, asChild: {Job: child.Facts()}},
			results:           []Result{result(byName, "uid-tw-w-0", 0, "A")},
			wantReason:        v1alpha1.ReasonDuplicateIndex,
			wantRejected:      v1alpha1.RejectionDuplicateIndex,
			wantTargetProblem: []int{0, 1},
		},
		{
			name: "only the index both map is shared; the other still covers its shard",
			spec: makeSpec("A", "B", "C").AssignJob("tw-w-0", "0-1", "A", "B").AssignJob("", "1", "C").Target(childRef(0)),
			obs:  map[string]Observation{byName: {Job: child2.Facts()}, asChild: {Job: child2.Facts()}},
			// The child target also leaves index 0 unmapped: a target is checked on its own.
			wantReason:        v1alpha1.ReasonDuplicateIndex,
			wantText:          []string{"index 1 assigned twice"},
			wantCovered:       1,
			wantTargetProblem: []int{0, 1},
		},
		{
			name:              "a repair naming the same Job another way is no further identity",
			spec:              makeSpec("A").AssignJob("tw-w-0", "0", "A").Repair("", "0", "A").Target(childRef(0)),
			obs:               map[string]Observation{byName: {Job: child.Facts()}, asChild: {Job: child.Facts()}},
			wantReason:        v1alpha1.ReasonDuplicateIndex,
			wantText:          []string{"job tw-w-0 (assignments[0]) and jobset tw w[0] (repair assignments[1])"},
			wantTargetProblem: []int{0, 1},
		},
		{
			name:        "a repair by another Job is a further identity",
			spec:        makeSpec("A").AssignJob("", "0", "A").Target(childRef(0)).Repair("tw-repair", "0", "A"),
			obs:         map[string]Observation{asChild: {Job: child.Facts()}, "job/tw-repair": {Job: repairJob.Facts()}},
			wantReason:  v1alpha1.ReasonValid,
			wantCovered: 1,
		},
		{
			name:        "two children of the JobSet are two Jobs",
			spec:        makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(1)),
			obs:         map[string]Observation{byName: {Job: child.Facts()}, "jobset/tw/w/1": {Job: other.Facts()}},
			wantReason:  v1alpha1.ReasonValid,
			wantCovered: 2,
		},
		{
			name:       "the same Job target twice: the static duplicate, as before",
			spec:       makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("tw-w-0", "0", "B"),
			obs:        map[string]Observation{byName: {Job: child.Facts()}},
			wantReason: v1alpha1.ReasonDuplicateIndex,
			wantText:   []string{"job tw-w-0 index 0 is assigned twice (assignments[0] and assignments[1])"},
			// Static: found without the Job, so the coverage by index still shows.
			wantCovered: 2,
		},
		{
			name: "a JobSet child with and without jobIndex 0 is one target: the static duplicate",
			spec: makeSpec("A", "B").AssignJob("", "0", "A").Target(v1alpha1.TargetRef{JobSet: "tw", ReplicatedJob: "w"}).
				AssignJob("", "0", "B").Target(childRef(0)),
			obs:         map[string]Observation{asChild: {Job: child.Facts()}},
			wantReason:  v1alpha1.ReasonDuplicateIndex,
			wantText:    []string{"jobset tw w[0] index 0 is assigned twice (assignments[0] and assignments[1])"},
			wantCovered: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec.SpecObj()
			st := step(t, spec, nil, tc.obs, tc.results...).Status
			valid := tc.wantReason == v1alpha1.ReasonValid
			status := metav1.ConditionFalse
			if valid {
				status = metav1.ConditionTrue
			}
			wantCond(t, st, v1alpha1.ConditionAssignmentValid, status, tc.wantReason, "")
			msg := condOf(st, v1alpha1.ConditionAssignmentValid).Message
			for _, want := range tc.wantText {
				if !strings.Contains(msg, want) {
					t.Errorf("AssignmentValid message %q lacks %q", msg, want)
				}
			}
			if st.Shards.Covered != tc.wantCovered {
				t.Errorf("shards covered %d, want %d", st.Shards.Covered, tc.wantCovered)
			}
			if valid {
				wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
			} else {
				wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "")
				wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "")
			}
			if st.Shards.Accepted != tc.wantAccepted {
				t.Errorf("shards accepted %d, want %d", st.Shards.Accepted, tc.wantAccepted)
			}
			if tc.wantRejected != "" {
				if len(st.Results.Rejections) != 1 || st.Results.Rejections[0].Reason != tc.wantRejected {
					t.Errorf("rejections %+v; want one %s", st.Results.Rejections, tc.wantRejected)
				}
			}
			for i, ts := range st.Targets {
				named := false
				for _, p := range ts.Problems {
					named = named || strings.Contains(p, "are the same Job")
				}
				if want := slices.Contains(tc.wantTargetProblem, i); named != want {
					t.Errorf("target %s problems %q: naming the shared Job %v, want %v", ts.Name, ts.Problems, named, want)
				}
			}
		})
	}
}

// TestSharedIdentityThroughHistory: the two spellings keep reaching the same Job across
// a JobSet restart. While the child is gone, one target holds the old Job's record and
// the other has put it into history: the verdict does not lapse. After the restart both
// follow the new Job, and the old one is shared in history as well.
func TestSharedIdentityThroughHistory(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(0)).SpecObj()
	a0 := makeJob("tw-w-0", "uid-a0", 1)
	st := step(t, spec, nil, map[string]Observation{byName: {Job: a0.Facts()}, asChild: {Job: a0.Facts()}}).Status
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonDuplicateIndex, "")

	// The restart deleted the child: the Job target keeps its record, the child target's
	// identity is superseded into history.
	st = step(t, spec, &st, map[string]Observation{}).Status
	if len(st.History) != 1 || st.History[0].Target != asChild || st.History[0].UID != "uid-a0" {
		t.Fatalf("history %+v; want the child target's uid-a0", st.History)
	}
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonDuplicateIndex, "")
	if msg := condOf(st, v1alpha1.ConditionAssignmentValid).Message; !strings.Contains(msg, "UID uid-a0") {
		t.Errorf("message %q does not name the old Job", msg)
	}

	// Attempt 1 created the child again under its name; it covers index 0 for neither.
	a1 := makeJob("tw-w-0", "uid-a1", 1).Completed("0", 1).Complete(jobCondAt)
	st = step(t, spec, &st, map[string]Observation{byName: {Job: a1.Facts()}, asChild: {Job: a1.Facts(), RestartAttempt: 1}}).Status
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonDuplicateIndex, "")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonAssignmentInvalid, "")
	msg := condOf(st, v1alpha1.ConditionAssignmentValid).Message
	for _, uid := range []string{"UID uid-a1", "UID uid-a0"} {
		if !strings.Contains(msg, uid) {
			t.Errorf("message %q does not name %s", msg, uid)
		}
	}
	if st.Shards.Covered != 0 {
		t.Errorf("covered %d; the shared identity covers neither shard", st.Shards.Covered)
	}
}

// TestSameSpellingHistoryIsNoDuplicate: one target's successive identities are its
// history, not a second claim: a JobSet restart under one spelling stays valid.
func TestSameSpellingHistoryIsNoDuplicate(t *testing.T) {
	spec := makeSpec("A").AssignJob("", "0", "A").Target(childRef(0)).SpecObj()
	st := step(t, spec, nil, map[string]Observation{asChild: {Job: makeJob("tw-w-0", "uid-a0", 1).Facts()}}).Status
	st = step(t, spec, &st, map[string]Observation{}).Status
	a1 := makeJob("tw-w-0", "uid-a1", 1).Completed("0", 1).Complete(jobCondAt)
	st = step(t, spec, &st, map[string]Observation{asChild: {Job: a1.Facts(), RestartAttempt: 1}}).Status
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionTrue, v1alpha1.ReasonValid, "")
	wantCond(t, st, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "")
}

func condOf(st v1alpha1.BatchAccountStatus, typ string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestSharedIdentitiesBounded: however many targets reach one Job, the check costs set
// operations per target, not per pair, and reports a bounded number of problems.
func TestSharedIdentitiesBounded(t *testing.T) {
	const n = MaxTargets // the most an account may name (Compile)
	spec := makeCompactSpec("s", n)
	obs := map[string]Observation{}
	for i := range n {
		name := fmt.Sprintf("j-%04d", i)
		spec.AssignJobOrdinals(name, "0", fmt.Sprint(i))
		// Not a cluster a Job controller makes: every target observes one Job.
		obs["job/"+name] = Observation{Job: makeJob(name, "one-uid", 1).Completed("0", 1).Facts()}
	}
	st := step(t, spec.SpecObj(), nil, obs).Status
	wantCond(t, st, v1alpha1.ConditionAssignmentValid, metav1.ConditionFalse, v1alpha1.ReasonDuplicateIndex,
		"")
	if msg := condOf(st, v1alpha1.ConditionAssignmentValid).Message; !strings.Contains(msg, "more problems") || len(msg) > MaxConditionMessage {
		t.Errorf("message (%d bytes) %q", len(msg), msg)
	}
	if st.Shards.Covered != 0 {
		t.Errorf("covered %d, want 0", st.Shards.Covered)
	}
	named := 0
	for _, ts := range st.Targets {
		if len(ts.Problems) > 0 {
			named++
		}
	}
	if named > 2*maxProblems {
		t.Errorf("%d targets carry the problem; want at most %d", named, 2*maxProblems)
	}
}

// TestStandingResultsOfASharedIdentity: readers of recorded results (the CLI's map and
// explain) judge a shared identity as Compute does: its results stand for no shard,
// while a result of an identity only one target reaches still stands.
func TestStandingResultsOfASharedIdentity(t *testing.T) {
	cases := []struct {
		name    string
		spec    *wrappers.BatchAccountWrapper
		current map[string]types.UID
		history []v1alpha1.SupersededIdentity
		results []Result
		want    []int // shard ordinals with a standing result
	}{
		{
			name:    "one Job by name and as the JobSet's child: its result stands for neither shard",
			spec:    makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(0)).RequireResults(""),
			current: map[string]types.UID{byName: "uid-tw-w-0", asChild: "uid-tw-w-0"},
			results: []Result{result(byName, "uid-tw-w-0", 0, "A"), result(asChild, "uid-tw-w-0", 0, "B")},
		},
		{
			name:    "only the index both map is shared: the other index's result stands",
			spec:    makeSpec("A", "B", "C").AssignJob("tw-w-0", "0-1", "A", "B").AssignJob("", "1", "C").Target(childRef(0)).RequireResults(""),
			current: map[string]types.UID{byName: "uid-tw-w-0", asChild: "uid-tw-w-0"},
			results: []Result{result(byName, "uid-tw-w-0", 0, "A"), result(byName, "uid-tw-w-0", 1, "B")},
			want:    []int{0},
		},
		{
			// A JobSet restart: the Job by name keeps the Job as its record, the child
			// target put it in history and follows nothing yet.
			name:    "one Job by name and, in history, as the JobSet's child: its result stands for neither shard",
			spec:    makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(0)).RequireResults(""),
			current: map[string]types.UID{byName: "uid-tw-w-0"},
			history: []v1alpha1.SupersededIdentity{{Target: asChild, UID: "uid-tw-w-0"}},
			results: []Result{result(byName, "uid-tw-w-0", 0, "A")},
		},
		{
			name:    "another target's history holds another Job: the result stands",
			spec:    makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(0)).RequireResults(""),
			current: map[string]types.UID{byName: "uid-tw-w-0"},
			history: []v1alpha1.SupersededIdentity{{Target: asChild, UID: "uid-earlier"}},
			results: []Result{result(byName, "uid-tw-w-0", 0, "A")},
			want:    []int{0},
		},
		{
			name:    "two children of the JobSet are two Jobs: both stand",
			spec:    makeSpec("A", "B").AssignJob("tw-w-0", "0", "A").AssignJob("", "0", "B").Target(childRef(1)).RequireResults(""),
			current: map[string]types.UID{byName: "uid-tw-w-0", "jobset/tw/w/1": "uid-tw-w-1"},
			results: []Result{result(byName, "uid-tw-w-0", 0, "A"), result("jobset/tw/w/1", "uid-tw-w-1", 0, "B")},
			want:    []int{0, 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec.SpecObj()
			got := slices.Sorted(maps.Keys(StandingResults(Compile("ml-team", spec), spec, tc.current, tc.history, nil, tc.results)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("standing shards %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStartedAtIsTheIdentitysFirstStart: a target's StartedAt is its Job's first start,
// kept when a suspension (Kueue's preemption) clears the Job's startTime and when it
// starts again; a new identity of the target starts afresh.
func TestStartedAtIsTheIdentitysFirstStart(t *testing.T) {
	first, again := jobCondAt, jobCondAt.Add(time.Hour)
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
	steps := []struct {
		name string
		job  *wrappers.JobWrapper
		want *time.Time
	}{
		{name: "created suspended", job: makeJob("j", "uid-1", 2).Suspend(true)},
		{name: "started", job: makeJob("j", "uid-1", 2).StartTime(first), want: &first},
		{name: "suspended: startTime cleared", job: makeJob("j", "uid-1", 2).Suspend(true), want: &first},
		{name: "started again", job: makeJob("j", "uid-1", 2).StartTime(again), want: &first},
		{name: "recreated, not started", job: makeJob("j", "uid-2", 2).Suspend(true)},
		{name: "the new Job started", job: makeJob("j", "uid-2", 2).StartTime(again), want: &again},
	}
	prev := &v1alpha1.BatchAccountStatus{}
	for _, s := range steps {
		out := Compute(Input{Namespace: "ml-team", Generation: 1, Spec: spec, Previous: prev,
			Observations: map[string]Observation{"job/j": {Job: s.job.Facts()}}, Now: metav1.NewTime(again.Add(time.Hour))})
		got := out.Status.Targets[0].StartedAt
		switch {
		case s.want == nil && got != nil:
			t.Errorf("%s: startedAt %v, want none", s.name, got)
		case s.want != nil && (got == nil || !got.Time.Equal(*s.want)):
			t.Errorf("%s: startedAt %v, want %v", s.name, got, *s.want)
		}
		prev = &out.Status
	}
}
