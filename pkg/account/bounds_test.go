package account

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
)

// Bounds at and past every cap of the account: the kept entries are the right ones (the
// newest history and rejections, the lowest ledger and coveredBy ordinals) and the counts
// stay whole.

// TestHistoryBounded: a JobSet child recreated again and again keeps the newest
// maxHistory superseded identities, oldest first.
func TestHistoryBounded(t *testing.T) {
	spec := makeCompactSpec("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").SpecObj()
	for _, superseded := range []int{maxHistory - 1, maxHistory, maxHistory + 1, 3 * maxHistory} {
		t.Run(fmt.Sprint(superseded), func(t *testing.T) {
			var st v1alpha1.BatchAccountStatus
			for a := 0; a <= superseded; a++ {
				job := makeJob("train-workers-0", fmt.Sprintf("uid-%d", a), 2).Completed(fmt.Sprint(a%2), 1)
				st = step(t, spec, &st, map[string]Observation{"jobset/train/workers/0": {Job: job.Facts(), RestartAttempt: int32(a)}}).Status
			}
			kept := min(superseded, maxHistory)
			if len(st.History) != kept {
				t.Fatalf("history holds %d identities; want %d", len(st.History), kept)
			}
			for i, h := range st.History {
				a := superseded - kept + i
				if h.UID != types.UID(fmt.Sprintf("uid-%d", a)) || h.RestartAttempt != int32(a) || h.CompletedIndexes != fmt.Sprint(a%2) {
					t.Fatalf("history[%d] = %s attempt %d completed %q; want uid-%d attempt %d completed %d", i, h.UID, h.RestartAttempt, h.CompletedIndexes, a, a, a%2)
				}
			}
			if tg := st.Targets[0]; tg.UID != types.UID(fmt.Sprintf("uid-%d", superseded)) {
				t.Errorf("current identity %s; want uid-%d", tg.UID, superseded)
			}
		})
	}
}

// TestAttemptLedgerBounded: the ledger keeps the lowest maxLedger repeated indexes; the
// attempt count and the repeated indexes stay whole.
func TestAttemptLedgerBounded(t *testing.T) {
	for _, repeated := range []int{maxLedger - 1, maxLedger, maxLedger + 1, 2 * maxLedger} {
		t.Run(fmt.Sprint(repeated), func(t *testing.T) {
			n := repeated + 10
			spec := makeCompactSpec("s", int32(n)).AssignJobOrdinals("j", indexset.Range(0, n-1).String(), indexset.Range(0, n-1).String()).SpecObj()
			var idx []int
			for i := range n {
				idx = append(idx, i)
				if i < repeated {
					idx = append(idx, i)
				}
			}
			job := makeJob("j", "uid-j", int32(n)).Completed(indexset.Range(0, n-1).String(), int32(n))
			st := step(t, spec, nil, map[string]Observation{"job/j": {Job: job.Facts(), SuccessfulPods: pods("p", idx...)}}).Status
			tg := st.Targets[0]
			if int(tg.SuccessfulAttempts) != n+repeated || tg.RepeatedIndexes != indexset.Range(0, repeated-1).String() {
				t.Errorf("attempts %d repeated %q; want %d, %q", tg.SuccessfulAttempts, tg.RepeatedIndexes, n+repeated, indexset.Range(0, repeated-1))
			}
			if len(tg.AttemptLedger) != min(repeated, maxLedger) {
				t.Fatalf("ledger holds %d indexes; want %d", len(tg.AttemptLedger), min(repeated, maxLedger))
			}
			for k, e := range tg.AttemptLedger {
				if int(e.Index) != k || len(e.Pods) != 2 {
					t.Fatalf("ledger[%d] = index %d with %d pods; want index %d with 2", k, e.Index, len(e.Pods), k)
				}
			}
			// The pods are gone (the Job controller deleted the repeats): the counts stay.
			again := step(t, spec, &st, map[string]Observation{"job/j": {Job: job.Facts()}}).Status
			if tg := again.Targets[0]; int(tg.SuccessfulAttempts) != n+repeated {
				t.Errorf("after the pods are gone: attempts %d; want %d", tg.SuccessfulAttempts, n+repeated)
			}
			t.Run("repeated indexes after the pods are gone", func(t *testing.T) {
				if tg := again.Targets[0]; tg.RepeatedIndexes != indexset.Range(0, repeated-1).String() {
					t.Errorf("repeated %q; want %q", tg.RepeatedIndexes, indexset.Range(0, repeated-1))
				}
			})
		})
	}
}

// TestCoveredByBounded: shards covered only by repairs are named up to maxCoveredBy,
// lowest ordinals first; the covered count stays whole.
func TestCoveredByBounded(t *testing.T) {
	for _, repaired := range []int{maxCoveredBy, maxCoveredBy + 1, 2 * maxCoveredBy} {
		t.Run(fmt.Sprint(repaired), func(t *testing.T) {
			all := indexset.Range(0, repaired-1).String()
			spec := makeCompactSpec("s", int32(repaired)).AssignJobOrdinals("j", all, all).SpecObj()
			spec.Assignments = append(spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "r"}, Indexes: all, ShardOrdinals: all, Repair: true})
			st := step(t, spec, nil, map[string]Observation{
				"job/j": {Job: makeJob("j", "uid-j", int32(repaired)).Facts()},
				"job/r": {Job: makeJob("r", "uid-r", int32(repaired)).Completed(all, int32(repaired)).Facts()},
			}).Status
			if int(st.Shards.Covered) != repaired || st.Shards.MissingOrdinals != "" {
				t.Errorf("covered %d missing %q; want %d, none", st.Shards.Covered, st.Shards.MissingOrdinals, repaired)
			}
			if len(st.Shards.CoveredBy) != maxCoveredBy {
				t.Fatalf("coveredBy names %d shards; want %d", len(st.Shards.CoveredBy), maxCoveredBy)
			}
			for o, c := range st.Shards.CoveredBy {
				if c != (v1alpha1.ShardCoverage{Shard: fmt.Sprintf("s%d", o), Target: "job/r", Index: int32(o)}) {
					t.Fatalf("coveredBy[%d] = %+v; want s%d by job/r index %d", o, c, o, o)
				}
			}
		})
	}
}

// TestRejectionsBounded: the newest maxRejections rejections are kept; the rejected and
// conflict counts stay whole.
func TestRejectionsBounded(t *testing.T) {
	for _, n := range []int{maxRejections - 1, maxRejections, maxRejections + 1, 4 * maxRejections} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").RequireResults("").SpecObj()
			obs := map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 2).Completed("0-1", 2).Facts()}}
			results := []Result{result("job/j", "uid-j", 0, "A")}
			for i := range n {
				var r Result
				if i%2 == 0 {
					r = result("job/j", "uid-j", 1, "A") // forged: index 1 is B
				} else {
					r = result("job/j", "uid-j", 0, "A") // conflict with the first A
					r.Digest = fmt.Sprintf("sha256:%d", i)
				}
				r.Pod = fmt.Sprintf("pod-%d", i)
				results = append(results, r)
			}
			st := step(t, spec, nil, obs, results...).Status
			forged, conflicts := (n+1)/2, n/2
			if int(st.Results.Rejected) != forged || int(st.Results.Conflicts) != conflicts {
				t.Errorf("rejected %d conflicts %d; want %d, %d", st.Results.Rejected, st.Results.Conflicts, forged, conflicts)
			}
			kept := min(n, maxRejections)
			if len(st.Results.Rejections) != kept {
				t.Fatalf("%d rejections kept; want %d", len(st.Results.Rejections), kept)
			}
			for k, rj := range st.Results.Rejections {
				i := n - kept + k
				wantReason := v1alpha1.RejectionForgedClaim
				if i%2 == 1 {
					wantReason = v1alpha1.RejectionConflict
				}
				if rj.Pod != fmt.Sprintf("pod-%d", i) || rj.Reason != wantReason {
					t.Fatalf("rejections[%d] = %s %s; want pod-%d %s", k, rj.Pod, rj.Reason, i, wantReason)
				}
			}
			if st.Results.RejectedOrdinals != "1" || st.Shards.Accepted != 1 {
				t.Errorf("rejected ordinals %q accepted %d; want 1, 1", st.Results.RejectedOrdinals, st.Shards.Accepted)
			}
		})
	}
}

// TestTargetProblemsBounded: a target keeps at most maxProblems problems, each within
// maxProblemMessage bytes.
func TestTargetProblemsBounded(t *testing.T) {
	for _, corrupt := range []int{maxProblems - 2, maxProblems - 1, maxProblems, 3 * maxProblems} {
		t.Run(fmt.Sprint(corrupt), func(t *testing.T) {
			spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
			// One UnmappedIndexes problem plus one ignored token per non-number.
			var toks []string
			for i := range corrupt {
				toks = append(toks, fmt.Sprintf("x%d", i))
			}
			job := makeJob("j", "uid-j", 1000).Completed(strings.Join(toks, ","), 0)
			st := step(t, spec, nil, map[string]Observation{"job/j": {Job: job.Facts()}}).Status
			_, ignored := indexset.ParseJobStatus(job.Status.CompletedIndexes, 1000)
			want := min(1+corrupt, maxProblems)
			if len(ignored) != corrupt {
				t.Fatalf("the corrupt list %q ignored %d tokens; want %d", job.Status.CompletedIndexes, len(ignored), corrupt)
			}
			if got := len(st.Targets[0].Problems); got != want {
				t.Errorf("%d problems kept; want %d", got, want)
			}
			for _, p := range st.Targets[0].Problems {
				if len(p) > maxProblemMessage {
					t.Errorf("problem of %d bytes; want at most %d", len(p), maxProblemMessage)
				}
			}
		})
	}
}

// TestProblemMessageClipped: a problem longer than maxProblemMessage is clipped to it,
// saying so; one at the limit is kept whole.
func TestProblemMessageClipped(t *testing.T) {
	for _, n := range []int{maxProblemMessage - 1, maxProblemMessage, maxProblemMessage + 1} {
		msg := strings.Repeat("x", n)
		got := clipMessage(msg, maxProblemMessage)
		switch {
		case n <= maxProblemMessage && got != msg:
			t.Errorf("%d bytes: clipped though within the limit", n)
		case n > maxProblemMessage && (len(got) > maxProblemMessage || !strings.HasSuffix(got, " … (message truncated)") || !strings.HasPrefix(got, "xxx")):
			t.Errorf("%d bytes: clipped to %d bytes %q…", n, len(got), got[:20])
		}
	}
}

// TestClipMessageOfInvalidUTF8: bytes that never start a rune are cut away whole, without
// reading before the message.
func TestClipMessageOfInvalidUTF8(t *testing.T) {
	if got, want := clipMessage(strings.Repeat("\x80", 100), 40), " … (message truncated)"; got != want {
		t.Errorf("clipMessage of continuation bytes = %q; want %q", got, want)
	}
}

// TestConditionMessagesBounded: an account whose every target has a long name keeps each
// condition message within MaxConditionMessage, valid UTF-8, and says it was cut.
func TestConditionMessagesBounded(t *testing.T) {
	long := strings.Repeat("é", 300)    // names are bounded by the API, not here
	longJob := strings.Repeat("j", 250) // a Job name must be valid: long, but ASCII
	spec := makeSpec()
	var shards []string
	for i := range 40 {
		shards = append(shards, fmt.Sprintf("%s-%d", long, i))
	}
	spec.Spec.Shards.Names = shards
	obs := map[string]Observation{}
	for i := range 40 {
		job := fmt.Sprintf("%s-%d", longJob, i)
		spec.AssignJob(job, "0", shards[i])
		obs["job/"+job] = Observation{Job: makeJob(job, "u"+fmt.Sprint(i), 1).Condition(batchv1.JobFailed, strings.Repeat("Réason", 100), jobCondAt).Facts()}
	}
	st := step(t, spec.SpecObj(), nil, obs).Status
	for _, c := range st.Conditions {
		if len(c.Message) > MaxConditionMessage || !utf8.ValidString(c.Message) {
			t.Errorf("%s message is %d bytes (valid UTF-8: %v); want at most %d", c.Type, len(c.Message), utf8.ValidString(c.Message), MaxConditionMessage)
		}
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionTerminated)
	if !strings.HasSuffix(c.Message, " … (message truncated)") {
		t.Errorf("Terminated message of %d bytes not marked as cut: …%q", len(c.Message), c.Message[max(0, len(c.Message)-40):])
	}
}

// TestMessageListsBounded pins the list bounds of the messages at and past each limit:
// names (messageNamesLimit), missing runs (messageRunsLimit), shard runs (8), problems (4).
func TestMessageListsBounded(t *testing.T) {
	t.Run("names", func(t *testing.T) {
		five := []string{"a", "b", "c", "d", "e"}
		if got := listNames(five); got != "a, b, c, d, e" {
			t.Errorf("five names: %q", got)
		}
		if got := listNames(append(five, "f")); got != "a, b, c, d, e and 1 more" {
			t.Errorf("six names: %q", got)
		}
		if got := boundList(five); len(got) != 5 {
			t.Errorf("five notes: %q", got)
		}
		if got := strings.Join(boundList(append(five, "f", "g")), "; "); got != "a; b; c; d; e; 2 more notes" {
			t.Errorf("seven notes: %q", got)
		}
	})
	t.Run("missing runs", func(t *testing.T) {
		// Shards s0..s11 on job j, every other index complete: six missing runs.
		spec := makeCompactSpec("s", 12).AssignJobOrdinals("j", "0-11", "0-11").SpecObj()
		for _, tc := range []struct{ completed, want string }{
			{"0,2,4,6,8,10,11", "7/12 shards covered; missing s1 = job j index 1, s3 = job j index 3, s5 = job j index 5, s7 = job j index 7, s9 = job j index 9"},
			{"0,2,4,6,8,10", "6/12 shards covered; missing s1 = job j index 1, s3 = job j index 3, s5 = job j index 5, s7 = job j index 7, s9 = job j index 9 (+1 more shards)"},
		} {
			st := step(t, spec, nil, map[string]Observation{"job/j": {Job: makeJob("j", "u", 12).Completed(tc.completed, 0).Facts()}}).Status
			wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, tc.want)
		}
	})
	t.Run("shard runs", func(t *testing.T) {
		var s Shards
		s.prefix, s.count = "s", 40
		eight := indexset.Of(0, 2, 4, 6, 8, 10, 12, 14)
		if got := s.Describe(eight, 8); got != "s0, s2, s4, s6, s8, s10, s12, s14" {
			t.Errorf("eight runs: %q", got)
		}
		if got := s.Describe(eight.Union(indexset.Range(16, 18)), 8); got != "s0, s2, s4, s6, s8, s10, s12, s14, … (+3 more)" {
			t.Errorf("nine runs: %q", got)
		}
	})
	t.Run("problems", func(t *testing.T) {
		for _, tc := range []struct {
			n    int
			want string
		}{{1, "p0"}, {2, "p0; p1"}, {4, "p0; p1; p2; p3"}, {5, "p0; p1; p2; p3 (+1 more problems)"}} {
			var ps []Problem
			for i := range tc.n {
				ps = append(ps, Problem{Reason: "R", Message: fmt.Sprintf("p%d", i)})
			}
			c := assignmentCondition(ps)
			if c.Message != tc.want {
				t.Errorf("%d problems: %q; want %q", tc.n, c.Message, tc.want)
			}
		}
	})
}

// TestAdmissionsAtTheCap: exactly MaxAdmissions admissions are all kept, none dropped.
func TestAdmissionsAtTheCap(t *testing.T) {
	spec := makeSpec("A").AssignJob("j", "0", "A").SpecObj()
	var st v1alpha1.BatchAccountStatus
	for i := range MaxAdmissions {
		for _, w := range []*v1alpha1.WorkloadObservation{
			{Name: "job-j", Admitted: true, ClusterQueue: fmt.Sprintf("cq-%d", i)},
			{Name: "job-j", Evicted: true, EvictionReason: "Preempted"},
		} {
			st = step(t, spec, &st, map[string]Observation{"job/j": {Job: makeJob("j", "u", 1).Facts(), Workload: w}}).Status
		}
	}
	tg := st.Targets[0]
	if len(tg.Admissions) != MaxAdmissions || tg.AdmissionsDropped != 0 || tg.Admissions[0].ClusterQueue != "cq-0" {
		t.Errorf("%d admissions from %q, %d dropped; want %d from cq-0, none dropped", len(tg.Admissions), tg.Admissions[0].ClusterQueue, tg.AdmissionsDropped, MaxAdmissions)
	}
}

// TestLargeAccountExactCoverage: the 100,000-shard input of the benchmarks is
// deterministic, so its coverage is exact. Each Job of 1,000 indexes completes 0-5,
// 7-12, ..., 994-998: it misses every index i with i%7 == 6 (6, 13, ..., 993: 142 of them)
// and its last, 999; 143 per Job, 14,300 in all.
func TestLargeAccountExactCoverage(t *testing.T) {
	st := Compute(largeInput(100, 1000)).Status
	if st.Shards.Total != 100000 || st.Shards.Covered != 85700 {
		t.Errorf("total %d covered %d; want 100000, 85700", st.Shards.Total, st.Shards.Covered)
	}
	missing := mustParse(t, st.Shards.MissingOrdinals)
	if missing.Count() != 14300 || !missing.Contains(6) || !missing.Contains(999) || missing.Contains(998) || !missing.Contains(99999) {
		t.Errorf("missing ordinals count %d; want 14300 with 6, 999 and 99999 and without 998", missing.Count())
	}
}

// list stands for an index list of exactly n bytes: fitIndexLists weighs lists by their
// length only, so their content does not matter here.
func list(n int) string { return strings.Repeat("7", n) }

// TestIndexListBytesCountsEveryList: every index list of the status adds its length.
func TestIndexListBytesCountsEveryList(t *testing.T) {
	st := v1alpha1.BatchAccountStatus{
		Shards:  v1alpha1.ShardSummary{MissingOrdinals: list(1)},
		Results: v1alpha1.ResultSummary{MissingOrdinals: list(2), RejectedOrdinals: list(4)},
		History: []v1alpha1.SupersededIdentity{{CompletedIndexes: list(8)}, {CompletedIndexes: list(16)}},
		Targets: []v1alpha1.TargetStatus{
			{CompletedIndexes: list(32), FailedIndexes: list(64), RepeatedIndexes: list(128), Required: list(256),
				Admissions: []v1alpha1.Admission{{CompletedIndexes: list(512)}}},
			{CompletedIndexes: list(1024), Admissions: []v1alpha1.Admission{{CompletedIndexes: list(2048)}, {CompletedIndexes: list(4096)}}},
		},
	}
	if got := indexListBytes(&st); got != 8191 {
		t.Errorf("indexListBytes = %d; want 8191 (1+2+...+4096)", got)
	}
}

// TestFitIndexListsAtTheBudget: a status exactly at IndexListBudget is left whole; one
// byte more leaves out the found target's completed indexes, and nothing else.
func TestFitIndexListsAtTheBudget(t *testing.T) {
	for _, over := range []int{0, 1} {
		st := v1alpha1.BatchAccountStatus{
			Shards:  v1alpha1.ShardSummary{MissingOrdinals: "5"},
			Targets: []v1alpha1.TargetStatus{{Found: true, Required: "0-9", CompletedIndexes: list(IndexListBudget - len("5") - len("0-9") + over)}},
		}
		fitIndexLists(&st, IndexListBudget, requiredKept{})
		tg := st.Targets[0]
		if omitted := tg.CompletedIndexesOmitted; omitted != (over == 1) || (tg.CompletedIndexes == "") != omitted {
			t.Errorf("%d over the budget: completedIndexesOmitted %v with %d bytes left", over, omitted, len(tg.CompletedIndexes))
		}
		if st.Shards.MissingOrdinals != "5" || st.Shards.MissingOrdinalsTruncated || tg.Required != "0-9" || len(tg.IndexesOmitted) != 0 {
			t.Errorf("%d over the budget: missing %q (truncated %v), required %q, omitted %v; want them untouched", over,
				st.Shards.MissingOrdinals, st.Shards.MissingOrdinalsTruncated, tg.Required, tg.IndexesOmitted)
		}
	}
}

// TestFitIndexListsTruncatesOrdinalsToTheirShare: when leaving out the Jobs' own lists is
// not enough, missing shard ordinals are cut to IndexListBudget/2 and the results'
// ordinals to IndexListBudget/16 each, at an interval boundary, and flagged; a list
// exactly at its share is neither cut nor flagged.
func TestFitIndexListsTruncatesOrdinalsToTheirShare(t *testing.T) {
	ordinals := func(n int) string { // "0,2,4,..." of at least n bytes
		var b strings.Builder
		for i := 0; b.Len() < n; i += 2 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, i)
		}
		return b.String()
	}
	missing := list(IndexListBudget / 2)
	results := ordinals(IndexListBudget / 8)
	st := v1alpha1.BatchAccountStatus{
		Shards:  v1alpha1.ShardSummary{MissingOrdinals: missing},
		Results: v1alpha1.ResultSummary{MissingOrdinals: results, RejectedOrdinals: results},
		// A deleted record's list goes last, so the ordinals are cut first.
		Targets: []v1alpha1.TargetStatus{{Deleted: true, CompletedIndexes: list(IndexListBudget / 2)}},
	}
	fitIndexLists(&st, IndexListBudget, requiredKept{})
	if st.Shards.MissingOrdinals != missing || st.Shards.MissingOrdinalsTruncated {
		t.Errorf("missing ordinals at their share: %d bytes, truncated %v; want untouched", len(st.Shards.MissingOrdinals), st.Shards.MissingOrdinalsTruncated)
	}
	for name, got := range map[string]string{"missing": st.Results.MissingOrdinals, "rejected": st.Results.RejectedOrdinals} {
		if len(got) > IndexListBudget/16 || len(got) < IndexListBudget/16-8 || !strings.HasPrefix(results, got) || strings.HasSuffix(got, ",") {
			t.Errorf("results' %s ordinals cut to %d bytes (a prefix: %v); want the whole intervals within %d", name, len(got), strings.HasPrefix(results, got), IndexListBudget/16)
		}
	}
	if !st.Results.OrdinalsTruncated {
		t.Errorf("results' ordinals cut but not flagged")
	}
	if tg := st.Targets[0]; !tg.CompletedIndexesOmitted || tg.CompletedIndexes != "" {
		t.Errorf("deleted record's list kept (%d bytes) though the status is still over the budget", len(tg.CompletedIndexes))
	}
}

// TestTruncateIntervals: a list is cut after its last whole interval within the limit,
// at and past the limit.
func TestTruncateIntervals(t *testing.T) {
	cases := []struct {
		s     string
		limit int
		want  string
	}{
		{"1-3,5", 5, "1-3,5"},            // at the limit: whole
		{"1-3,5", 6, "1-3,5"},            // under it
		{"1-3,5,7", 5, "1-3,5"},          // a comma right after the limit: the interval before it fits
		{"1-3,5,7", 4, "1-3"},            // cut inside an interval: back to the previous one
		{"12,3", 2, "12"},                // the first interval fits exactly
		{"123-456,7", 3, ""},             // not even the first interval fits
		{"0,2,4,6,8,10", 9, "0,2,4,6,8"}, // 9 bytes end right before a comma
	}
	for _, tc := range cases {
		if got := truncateIntervals(tc.s, tc.limit); got != tc.want {
			t.Errorf("truncateIntervals(%q, %d) = %q; want %q", tc.s, tc.limit, got, tc.want)
		}
	}
}

// TestLimitsShrinkWithTargets pins the per-target bounds at one, 64 and MaxTargets
// targets.
func TestLimitsShrinkWithTargets(t *testing.T) {
	for _, tc := range []struct {
		targets int
		want    limits
	}{
		{0, limits{admissions: 16, ledgerPods: 2048, problems: 16, problemBytes: 512, flavors: 16, history: 64}},
		{1, limits{admissions: 16, ledgerPods: 2048, problems: 16, problemBytes: 512, flavors: 16, history: 64}},
		{64, limits{admissions: 8, ledgerPods: 32, problems: 4, problemBytes: 512, flavors: 8, history: 64}},
		{MaxTargets, limits{admissions: 0, ledgerPods: 2, problems: 1, problemBytes: 128, flavors: 0, history: 64}},
	} {
		tc.want.status, tc.want.indexLists = StatusBudget, IndexListBudget
		if got := limitsFor(tc.targets); got != tc.want {
			t.Errorf("limitsFor(%d) = %+v; want %+v", tc.targets, got, tc.want)
		}
	}
}

// TestHistoryKeepsWhatTargetsNeed: a restart of more children than the history keeps
// leaves every child's superseded identity in history, and when the JobSet fails instead
// of recreating them each is its target's record again, its coverage counted.
func TestHistoryKeepsWhatTargetsNeed(t *testing.T) {
	const children = 2 * maxHistory
	spec := makeCompactSpec("s", 2*children)
	for c := range children {
		spec.AssignJobSet("train", "workers", int32(c), "0-1", fmt.Sprintf("%d-%d", 2*c, 2*c+1))
	}
	key := func(c int) string { return fmt.Sprintf("jobset/train/workers/%d", c) }
	running := map[string]Observation{}
	gone, failed := map[string]Observation{}, map[string]Observation{}
	for c := range children {
		running[key(c)] = Observation{Job: makeJob(fmt.Sprintf("train-workers-%d", c), fmt.Sprintf("uid-%d", c), 2).Completed("0", 1).Facts()}
		failed[key(c)] = Observation{OwnerEnded: "Failed"}
	}
	st := step(t, spec.SpecObj(), nil, running).Status
	st = step(t, spec.SpecObj(), &st, gone).Status
	if len(st.History) != children || st.HistoryDropped != 0 {
		t.Fatalf("history holds %d identities, %d dropped; want all %d, none dropped", len(st.History), st.HistoryDropped, children)
	}
	st = step(t, spec.SpecObj(), &st, failed).Status
	if st.Shards.Covered != children {
		t.Errorf("covered %d shards after the JobSet failed; want %d (index 0 of each record)", st.Shards.Covered, children)
	}
	for _, tg := range st.Targets {
		if !tg.Deleted || tg.CompletedIndexes != "0" {
			t.Fatalf("target %s: deleted %v completed %q; want the superseded identity's record", tg.Name, tg.Deleted, tg.CompletedIndexes)
		}
	}
}

// TestAttemptLedgerFoldsIntoCounts: an index with more pods than a ledger entry holds is
// folded into counts: the attempts stay exact, its pods seen again are not counted twice,
// and the ledger never breaks the API's bound.
func TestAttemptLedgerFoldsIntoCounts(t *testing.T) {
	spec := makeSpec("A", "B").AssignJob("j", "0-1", "A", "B").SpecObj()
	job := makeJob("j", "uid-j", 2).Completed("0-1", 2).Obj()
	idx := []int{1}
	for range maxLedgerPods + 8 {
		idx = append(idx, 0)
	}
	ps := pods("p", idx...)
	var st v1alpha1.BatchAccountStatus
	for round := range 3 {
		st = step(t, spec, &st, map[string]Observation{"job/j": {Job: jobkind.Facts(job), SuccessfulPods: ps, PodsListed: true}}).Status
		tg := st.Targets[0]
		if tg.SuccessfulAttempts != int32(len(idx)) || len(tg.AttemptLedger) != 0 || tg.AttemptLedgerDropped != 1 ||
			tg.AttemptsUnledgered != maxLedgerPods+7 || tg.RepeatedIndexes != "0" {
			t.Fatalf("round %d: %d attempts, ledger %d entries (%d dropped, %d attempts unledgered), repeated %q; want %d, 0 (1, %d), \"0\"",
				round, tg.SuccessfulAttempts, len(tg.AttemptLedger), tg.AttemptLedgerDropped, tg.AttemptsUnledgered, tg.RepeatedIndexes, len(idx), maxLedgerPods+7)
		}
	}
	// A second pod on index 1 is a new repeat: it fits the ledger and is counted once.
	ps = append(ps, PodAttempt{UID: "p-extra", Index: 1})
	for range 2 {
		st = step(t, spec, &st, map[string]Observation{"job/j": {Job: jobkind.Facts(job), SuccessfulPods: ps, PodsListed: true}}).Status
	}
	if tg := st.Targets[0]; tg.SuccessfulAttempts != int32(len(idx)+1) || len(tg.AttemptLedger) != 1 || tg.RepeatedIndexes != "0,1" {
		t.Errorf("after a repeat of index 1: %d attempts, %d ledger entries, repeated %q; want %d, 1, \"0,1\"", tg.SuccessfulAttempts, len(tg.AttemptLedger), tg.RepeatedIndexes, len(idx)+1)
	}
}

// TestAdmissionsNotKept: an account too large to keep admissions (limitsFor gives 0)
// counts each admission once and recomputes to itself while the admission holds.
func TestAdmissionsNotKept(t *testing.T) {
	saved := statusLimits
	statusLimits = func(n int) limits { l := limitsFor(n); l.admissions = 0; return l }
	t.Cleanup(func() { statusLimits = saved })
	spec := makeSpec("A").AssignJob("j", "0", "A").SpecObj()
	var st v1alpha1.BatchAccountStatus
	for i, w := range []*v1alpha1.WorkloadObservation{
		{Name: "job-j", Admitted: true, ClusterQueue: "cq"},
		{Name: "job-j", Admitted: true, ClusterQueue: "cq"},
		{Name: "job-j", Evicted: true, EvictionReason: "Preempted"},
		{Name: "job-j", Admitted: true, ClusterQueue: "cq"},
		{Name: "job-j", Admitted: true, ClusterQueue: "cq"},
	} {
		st = at(spec, &st, time.Duration(i)*time.Minute, map[string]Observation{"job/j": {Job: makeJob("j", "u", 1).Facts(), Workload: w}}).Status
	}
	if tg := st.Targets[0]; len(tg.Admissions) != 0 || tg.AdmissionsDropped != 2 {
		t.Errorf("%d admissions kept, %d dropped; want none kept, 2 dropped", len(tg.Admissions), tg.AdmissionsDropped)
	}
	wantFixedPoint(t, spec, st, time.Hour, map[string]Observation{"job/j": {Job: makeJob("j", "u", 1).Facts(), Workload: &v1alpha1.WorkloadObservation{Name: "job-j", Admitted: true, ClusterQueue: "cq"}}})
}

// TestCoveredByDroppedCounts: the shards covered only by repair that coveredBy does not
// name are counted.
func TestCoveredByDroppedCounts(t *testing.T) {
	const repaired = maxCoveredBy + 10
	all := indexset.Range(0, repaired-1).String()
	spec := makeCompactSpec("s", repaired).AssignJobOrdinals("j", all, all).SpecObj()
	spec.Assignments = append(spec.Assignments, v1alpha1.Assignment{Target: v1alpha1.TargetRef{Job: "r"}, Indexes: all, ShardOrdinals: all, Repair: true})
	st := step(t, spec, nil, map[string]Observation{
		"job/j": {Job: makeJob("j", "uid-j", repaired).Facts()},
		"job/r": {Job: makeJob("r", "uid-r", repaired).Completed(all, repaired).Facts()},
	}).Status
	if len(st.Shards.CoveredBy) != maxCoveredBy || st.Shards.CoveredByDropped != 10 {
		t.Errorf("coveredBy names %d, %d dropped; want %d, 10", len(st.Shards.CoveredBy), st.Shards.CoveredByDropped, maxCoveredBy)
	}
}
