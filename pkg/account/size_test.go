package account

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
)

// etcdRequestLimit is etcd's default --max-request-bytes: a larger object is never stored.
const etcdRequestLimit = 1.5 * (1 << 20)

// TestStatusStaysWithinTheObjectSizeLimit: accounts of a million shards with scattered
// gaps keep their status writable, say what they left out, and leave small accounts
// untouched.
func TestStatusStaysWithinTheObjectSizeLimit(t *testing.T) {
	cases := map[string]struct {
		in            Input
		wantOmitted   bool
		wantTruncated bool
	}{
		// 100 Jobs x 1,000 indexes, every 7th missing: small enough to carry everything.
		"100k shards": {in: largeInput(100, 1000)},
		// 100 Jobs x 10,000: 1.4 MB of completedIndexes and ~1 MB of missing ordinals.
		"1M shards, every 7th missing": {in: largeInput(100, 10000), wantOmitted: true, wantTruncated: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := Compute(tc.in)
			st := out.Status
			raw, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) > etcdRequestLimit*2/3 {
				t.Errorf("status is %d bytes of JSON; want well under etcd's %d", len(raw), int(etcdRequestLimit))
			}
			for _, ts := range st.Targets {
				if ts.CompletedIndexesOmitted != tc.wantOmitted || (ts.CompletedIndexes == "") != tc.wantOmitted {
					t.Fatalf("target %s: completedIndexesOmitted=%v with %d bytes of completedIndexes; want omitted=%v",
						ts.Name, ts.CompletedIndexesOmitted, len(ts.CompletedIndexes), tc.wantOmitted)
				}
			}
			if st.Shards.MissingOrdinalsTruncated != tc.wantTruncated {
				t.Errorf("missingOrdinalsTruncated = %v, want %v", st.Shards.MissingOrdinalsTruncated, tc.wantTruncated)
			}
			listed, err := indexset.Parse(st.Shards.MissingOrdinals)
			if err != nil {
				t.Fatalf("missingOrdinals no longer parses: %v", err)
			}
			missing := int(st.Shards.Total - st.Shards.Covered)
			if tc.wantTruncated {
				if listed.Count() == 0 || listed.Count() >= missing || len(st.Shards.MissingOrdinals) > IndexListBudget {
					t.Errorf("truncated missingOrdinals lists %d of %d missing shards in %d bytes", listed.Count(), missing, len(st.Shards.MissingOrdinals))
				}
			} else if listed.Count() != missing {
				t.Errorf("missingOrdinals lists %d shards, %d are missing", listed.Count(), missing)
			}

			// Computing again from the written status changes nothing: a bounded status
			// must not cost a write per reconcile.
			again := tc.in
			again.Previous = &st
			if next := Compute(again); !equality.Semantic.DeepEqual(next.Status, st) || len(next.Changed) != 0 {
				t.Errorf("recomputing from the bounded status changed it (%d condition changes)", len(next.Changed))
			}
		})
	}
}

// gapped is the completedIndexes of a Job of n indexes missing every 7th (and its last).
func gapped(n int) string {
	var b strings.Builder
	for start := 0; start < n-1; start += 7 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d", start, min(start+5, n-2))
	}
	return b.String()
}

// largeJobSetInput is a 1,000,000-shard account over the 100 children of a JobSet
// (10,000 indexes each) restarted 64 times: a full history of superseded identities with
// scattered coverage, and current children with scattered completed and failed indexes,
// each admitted by Kueue.
func largeJobSetInput() Input {
	const children, perChild, restarts = 100, 10000, 64
	spec := makeCompactSpec("shard-", children*perChild)
	done := gapped(perChild)
	var failed strings.Builder
	for i := 6; i < perChild; i += 7 {
		if failed.Len() > 0 {
			failed.WriteByte(',')
		}
		fmt.Fprint(&failed, i)
	}
	prev := &v1alpha1.BatchAccountStatus{}
	obs := map[string]Observation{}
	for c := range children {
		spec.AssignJobSet("train", "workers", int32(c), fmt.Sprintf("0-%d", perChild-1), fmt.Sprintf("%d-%d", c*perChild, (c+1)*perChild-1))
		key := fmt.Sprintf("jobset/train/workers/%d", c)
		job := fmt.Sprintf("train-workers-%d", c)
		prev.Targets = append(prev.Targets, v1alpha1.TargetStatus{Name: key, Job: job, UID: types.UID(fmt.Sprintf("%s-a%d", job, restarts-1)), RestartAttempt: restarts - 1, Found: true, CompletedIndexes: done})
		obs[key] = Observation{
			Job:            makeJob(job, fmt.Sprintf("%s-a%d", job, restarts), perChild).Completed(done, 0).FailedIndexes(failed.String()).Facts(),
			RestartAttempt: restarts,
			Workload:       &v1alpha1.WorkloadObservation{Name: "jobset-train", Admitted: true, ClusterQueue: "ml-team", Flavors: []string{"workers=nvidia.com/gpu:h100"}},
		}
	}
	for r := range restarts {
		prev.History = append(prev.History, v1alpha1.SupersededIdentity{Target: "jobset/train/workers/0", Job: "train-workers-0", UID: types.UID(fmt.Sprintf("old-%d", r)), RestartAttempt: int32(r), CompletedIndexes: done})
	}
	return Input{Namespace: "ml-team", Generation: 1, Spec: spec.SpecObj(), Previous: prev, Observations: obs, Now: metav1.NewTime(time0)}
}

// TestMillionShardJobSetRestartedStaysWritable: every index list the status writes is
// in the budget, so a million-shard account over JobSet children restarted 64 times
// (history full) stays under the object size limit, says what it left out, and
// recomputes to itself.
func TestMillionShardJobSetRestartedStaysWritable(t *testing.T) {
	in := largeJobSetInput()
	st := Compute(in).Status
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > etcdRequestLimit*2/3 {
		t.Errorf("status is %d bytes of JSON; want well under etcd's %d", len(raw), int(etcdRequestLimit))
	}
	if n := indexListBytes(&st); n > IndexListBudget {
		t.Errorf("index lists take %d bytes, over the %d budget", n, IndexListBudget)
	}
	t.Logf("status JSON %d bytes, index lists %d bytes; targets' completedIndexes omitted: %v, missingOrdinals truncated: %v",
		len(raw), indexListBytes(&st), st.Targets[0].CompletedIndexesOmitted, st.Shards.MissingOrdinalsTruncated)
	if len(st.History) != maxHistory {
		t.Fatalf("history has %d entries, want it full (%d)", len(st.History), maxHistory)
	}
	for _, h := range st.History {
		if h.CompletedIndexes == "" && !h.CompletedIndexesOmitted {
			t.Fatalf("history entry %s reads as nothing covered without saying it was left out", h.UID)
		}
	}
	for _, ts := range st.Targets {
		for _, a := range ts.Admissions {
			if a.CompletedIndexes == "" && !a.CompletedIndexesOmitted {
				t.Fatalf("target %s: an admission's completed indexes are empty without saying they were left out", ts.Name)
			}
		}
		if ts.CompletedIndexes == "" && !ts.CompletedIndexesOmitted {
			t.Fatalf("target %s: completedIndexes empty without saying it was left out", ts.Name)
		}
	}
	again := in
	again.Previous = &st
	if next := Compute(again); !equality.Semantic.DeepEqual(next.Status, st) || len(next.Changed) != 0 {
		t.Errorf("recomputing from the bounded status changed it (%d condition changes)", len(next.Changed))
	}
}

// shape is a batch at the extremes the API admits, played as the reconciles of its life:
// targets JobSet children (or plain Jobs) of perTarget indexes each; every identity
// admitted and preempted admissions times (each admission on other flavors, so each is
// recorded); retries successful pods on every completed index; restarts times a JobSet
// restart (every child gone, then recreated under a new UID); and at the end, when
// endedInRestart, the JobSet fails while its children are gone, so that each target's
// record is the identity the restart had superseded.
type shape struct {
	targets, perTarget, admissions, retries, restarts int
	plainJobs, endedInRestart                         bool
}

// Names as long as the API and the JobSet controller let them be: a child Job name is
// at most 63 characters (<jobSet>-<replicatedJob>-<jobIndex>), a ClusterQueue a DNS label.
var (
	longJobSet = "train-llama-3-70b-instruct-finetune-rlhf" // 40
	longRJ     = "workers"
	longCQ     = "ml-research-gpu-h100-80gb-sxm5-reserved-capacity-team-a-queue"
)

func (sh shape) key(i int) string {
	if sh.plainJobs {
		return "job/" + sh.jobName(i)
	}
	return fmt.Sprintf("jobset/%s/%s/%d", longJobSet, longRJ, i)
}

func (sh shape) jobName(i int) string {
	if sh.plainJobs {
		return fmt.Sprintf("%s-%s-%04d", longJobSet, "shard-group", i)
	}
	return fmt.Sprintf("%s-%s-%d", longJobSet, longRJ, i)
}

func (sh shape) spec() *v1alpha1.BatchAccountSpec {
	spec := makeCompactSpec("shard-", int32(sh.targets*sh.perTarget)).RequireResults("")
	all := fmt.Sprintf("0-%d", sh.perTarget-1)
	for i := range sh.targets {
		ords := fmt.Sprintf("%d-%d", i*sh.perTarget, (i+1)*sh.perTarget-1)
		if sh.plainJobs {
			spec.AssignJobOrdinals(sh.jobName(i), all, ords)
		} else {
			spec.AssignJobSet(longJobSet, longRJ, int32(i), all, ords)
		}
	}
	return spec.SpecObj()
}

// uid is a UID of the API server's length (36) for the n-th object.
func uid(kind byte, n int) types.UID {
	return types.UID(fmt.Sprintf("%08x-%04x-4000-8000-%012x", n, kind, n*2654435761))
}

// play computes the account through every reconcile of sh's life, each on top of the
// status the one before wrote, and returns the last status, the largest JSON any
// reconcile wrote, and the last input (to recompute it).
func (sh shape) play(t testing.TB, measure bool) (v1alpha1.BatchAccountStatus, int, Input) {
	t.Helper()
	spec := sh.spec()
	var st v1alpha1.BatchAccountStatus
	var in Input
	largest, step := 0, 0
	compute := func(obs map[string]Observation) {
		step++
		prev := st
		in = Input{Namespace: "ml-team", Generation: 1, Spec: spec, Previous: &prev, Observations: obs,
			Now: metav1.NewTime(time0.Add(time.Duration(step) * time.Minute))}
		st = Compute(in).Status
		if !measure {
			return
		}
		raw, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(raw))
	}
	identities := 1
	if !sh.plainJobs {
		identities += sh.restarts
	}
	for r := range identities {
		last := r == identities-1
		for a := range sh.admissions {
			// Indexes complete as admissions go by: every third one stays missing until the
			// last admission of the last identity.
			var done []int
			for i := range sh.perTarget * (a + 1) / sh.admissions {
				if i%3 != 2 || (last && a == sh.admissions-1) {
					done = append(done, i)
				}
			}
			completed := indexset.Of(done...)
			for _, evicted := range []bool{false, true} {
				if evicted && last && a == sh.admissions-1 {
					break // the last admission runs to the end
				}
				obs := map[string]Observation{}
				for i := range sh.targets {
					job := makeJob(sh.jobName(i), string(uid('j', r*sh.targets+i)), int32(sh.perTarget)).
						ResourceVersion(fmt.Sprint(1000+step)).Completed(completed.String(), int32(len(done)))
					if last && a == sh.admissions-1 && !sh.endedInRestart {
						job.Complete(jobCondAt)
					}
					w := &v1alpha1.WorkloadObservation{Name: "jobset-" + longJobSet + "-3f2c9", UID: uid('w', 0), Admitted: !evicted,
						ClusterQueue: longCQ, ObservedResourceVersion: fmt.Sprint(1000 + step),
						Flavors: []string{fmt.Sprintf("%s=nvidia.com/gpu:h100-80gb-sxm5-%d", longRJ, a), longRJ + "=cpu:default", longRJ + "=memory:default"}}
					if evicted {
						w.Evicted, w.EvictionReason = true, "Preempted"
					}
					if sh.plainJobs {
						w.Name = "job-" + sh.jobName(i) + "-3f2c9"
					}
					ps := make([]PodAttempt, 0, len(done)*sh.retries)
					for _, x := range done {
						for k := range sh.retries {
							ps = append(ps, PodAttempt{UID: uid('p', ((r*sh.targets+i)*sh.perTarget+x)*sh.retries+k), Index: x})
						}
					}
					obs[sh.key(i)] = Observation{Job: job.Facts(), RestartAttempt: int32(r), Workload: w, SuccessfulPods: ps, PodsListed: true}
				}
				compute(obs)
			}
		}
		if !last || sh.endedInRestart {
			// The JobSet restarts: every child is gone before its successor appears; the
			// last time, it fails instead.
			obs := map[string]Observation{}
			if last {
				for i := range sh.targets {
					obs[sh.key(i)] = Observation{OwnerEnded: "Failed"}
				}
			}
			compute(obs)
		}
	}
	return st, largest, in
}

// unbounded computes the account without the bounds of limitsFor, the status budget or
// the index list budget (only the API's own caps on a ledger entry stay).
func unbounded(t testing.TB) {
	const huge = 1 << 30
	saved := statusLimits
	statusLimits = func(int) limits {
		return limits{admissions: huge, ledgerPods: huge, problems: huge, problemBytes: maxProblemMessage, flavors: huge, history: huge, status: huge, indexLists: huge}
	}
	t.Cleanup(func() { statusLimits = saved })
}

// verdictOf is what a status decides and counts, without its lists: it must not depend
// on what the bounds left out.
type verdictOf struct {
	Conditions                  []string
	Total, Covered, Accepted    int32
	Missing                     string
	Rejected, Conflicts, Absent int32
	Targets                     []string
	Admissions, History         int
}

// diff names the first difference from want.
func (v verdictOf) diff(want verdictOf) string {
	for i := range max(len(v.Conditions), len(want.Conditions)) {
		if i >= len(v.Conditions) || i >= len(want.Conditions) || v.Conditions[i] != want.Conditions[i] {
			return fmt.Sprintf("condition %d:\n%.600s\nwant\n%.600s", i, v.Conditions[min(i, len(v.Conditions)-1)], want.Conditions[min(i, len(want.Conditions)-1)])
		}
	}
	for i := range max(len(v.Targets), len(want.Targets)) {
		if i >= len(v.Targets) || i >= len(want.Targets) || v.Targets[i] != want.Targets[i] {
			return fmt.Sprintf("target %d: %s; want %s", i, v.Targets[min(i, len(v.Targets)-1)], want.Targets[min(i, len(want.Targets)-1)])
		}
	}
	v.Conditions, v.Targets, want.Conditions, want.Targets = nil, nil, nil, nil
	if !equality.Semantic.DeepEqual(v, want) {
		return fmt.Sprintf("%+v; want %+v", v, want)
	}
	return ""
}

func verdict(st *v1alpha1.BatchAccountStatus) verdictOf {
	v := verdictOf{Total: st.Shards.Total, Covered: st.Shards.Covered, Accepted: st.Shards.Accepted, Missing: st.Shards.Missing,
		Rejected: st.Results.Rejected, Conflicts: st.Results.Conflicts, Absent: st.Results.Missing,
		History: len(st.History) + int(st.HistoryDropped)}
	for _, c := range st.Conditions {
		v.Conditions = append(v.Conditions, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	for _, t := range st.Targets {
		v.Targets = append(v.Targets, fmt.Sprintf("%s uid=%s found=%v deleted=%v succeeded=%d attempts=%d terminal=%s",
			t.Name, t.UID, t.Found, t.Deleted, t.Succeeded, t.SuccessfulAttempts, t.Terminal))
		v.Admissions += len(t.Admissions) + int(t.AdmissionsDropped)
	}
	return v
}

// TestWorstShapesStayWithinTheStatusBudget: the largest shapes the API admits, played
// through every reconcile of their lives, keep every status they write within
// StatusBudget, recompute to themselves, and decide and count exactly what the same
// life computed without bounds does.
func TestWorstShapesStayWithinTheStatusBudget(t *testing.T) {
	cases := []struct {
		name string
		sh   shape
	}{
		{"1,024 children, 3 restarts, preempted twice, 3 pods per index", shape{targets: MaxTargets, perTarget: 16, admissions: 3, retries: 3, restarts: 3}},
		{"1,024 children, the JobSet failed during a restart", shape{targets: MaxTargets, perTarget: 16, admissions: 2, retries: 2, restarts: 2, endedInRestart: true}},
		{"1,024 plain Jobs, preempted twice, 3 pods per index", shape{targets: MaxTargets, perTarget: 16, admissions: 3, retries: 3, plainJobs: true}},
		{"256 children of 64 indexes, 3 restarts, 6 admissions, 2 pods per index", shape{targets: 256, perTarget: 64, admissions: 6, retries: 2, restarts: 3}},
		{"32 children, 2 restarts, 20 admissions, 3 pods per index", shape{targets: 32, perTarget: 64, admissions: 20, retries: 3, restarts: 2}},
		{"one Job of 4,096 indexes, 20 admissions, 40 pods per index", shape{targets: 1, perTarget: 4096, admissions: 20, retries: 40, plainJobs: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, largest, in := tc.sh.play(t, true)
			if largest > StatusBudget {
				t.Errorf("a reconcile wrote %d bytes of status JSON; want at most StatusBudget (%d)", largest, StatusBudget)
			}
			if err := withinAPIBounds(&st); err != "" {
				t.Errorf("the status breaks the API's bounds: %s", err)
			}
			again := in
			again.Previous = &st
			if next := Compute(again); !equality.Semantic.DeepEqual(next.Status, st) || len(next.Changed) != 0 {
				t.Errorf("recomputing from the bounded status changed it (%d condition changes): %.2000s", len(next.Changed), strings.Join(statusDiff(&st, &next.Status), "; "))
			}
			for _, tg := range st.Targets {
				if want := int32(tc.sh.perTarget * tc.sh.retries); tg.Found && tg.SuccessfulAttempts != want {
					t.Fatalf("target %s counts %d attempts; want %d (%d indexes of %d pods)", tg.Name, tg.SuccessfulAttempts, want, tc.sh.perTarget, tc.sh.retries)
				}
			}
			unbounded(t)
			whole, _, _ := tc.sh.play(t, false)
			if diff := verdict(&st).diff(verdict(&whole)); diff != "" {
				t.Errorf("the bounded account decides or counts otherwise than the unbounded one: %s", diff)
			}
			raw, _ := json.Marshal(whole)
			t.Logf("largest status %d bytes of JSON (unbounded, at the end: %d); %d history entries (%d dropped)", largest, len(raw), len(st.History), st.HistoryDropped)
		})
	}
}

// withinAPIBounds checks the MaxItems (and items' MaxLength) markers of the status lists.
func withinAPIBounds(st *v1alpha1.BatchAccountStatus) string {
	check := func(what string, n, limit int) string {
		if n > limit {
			return fmt.Sprintf("%s has %d items, over %d", what, n, limit)
		}
		return ""
	}
	errs := []string{check("targets", len(st.Targets), MaxTargets), check("history", len(st.History), MaxTargets+maxHistory),
		check("coveredBy", len(st.Shards.CoveredBy), 256), check("rejections", len(st.Results.Rejections), 32)}
	for _, t := range st.Targets {
		errs = append(errs, check(t.Name+" admissions", len(t.Admissions), MaxAdmissions), check(t.Name+" problems", len(t.Problems), 16),
			check(t.Name+" attemptLedger", len(t.AttemptLedger), 256), check(t.Name+" indexesOmitted", len(t.IndexesOmitted), 4))
		for _, e := range t.AttemptLedger {
			errs = append(errs, check(fmt.Sprintf("%s attemptLedger[%d].pods", t.Name, e.Index), len(e.Pods), 32))
		}
		for _, a := range t.Admissions {
			errs = append(errs, check(t.Name+" admission flavors", len(a.Flavors), 64))
		}
		if t.Workload != nil {
			errs = append(errs, check(t.Name+" workload flavors", len(t.Workload.Flavors), 64))
		}
		for _, p := range t.Problems {
			errs = append(errs, check(t.Name+" problem bytes", len(p), 512))
		}
	}
	return strings.Join(slices.DeleteFunc(errs, func(s string) bool { return s == "" }), "; ")
}

// BenchmarkAccount1024Children is one reconcile of the largest account (1,024 JobSet
// children restarted 3 times, preempted twice, 3 pods on every index) in its steady
// state, with the status's JSON size.
func BenchmarkAccount1024Children(b *testing.B) {
	st, _, in := shape{targets: MaxTargets, perTarget: 16, admissions: 3, retries: 3, restarts: 3}.play(b, false)
	in.Previous = &st
	raw, _ := json.Marshal(st)
	b.ReportAllocs()
	for b.Loop() {
		out := Compute(in)
		in.Previous = &out.Status
	}
	b.ReportMetric(float64(len(raw))/(1<<10), "KiB-status-JSON")
}

// statusDiff names the fields that differ between two statuses (a target's as
// <name>.<field>).
func statusDiff(was, now *v1alpha1.BatchAccountStatus) []string {
	var out []string
	fields := func(prefix string, a, b any) {
		ra, rb := map[string]json.RawMessage{}, map[string]json.RawMessage{}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		_ = json.Unmarshal(ja, &ra)
		_ = json.Unmarshal(jb, &rb)
		for k, v := range ra {
			if string(rb[k]) != string(v) {
				out = append(out, fmt.Sprintf("%s%s: %.200s -> %.200s", prefix, k, v, rb[k]))
			}
		}
		for k, v := range rb {
			if _, ok := ra[k]; !ok {
				out = append(out, fmt.Sprintf("%s%s: none -> %.200s", prefix, k, v))
			}
		}
	}
	a, b := *was, *now
	a.Targets, b.Targets = nil, nil
	fields("", a, b)
	for i := range min(len(was.Targets), len(now.Targets)) {
		fields(was.Targets[i].Name+".", was.Targets[i], now.Targets[i])
	}
	return out
}
