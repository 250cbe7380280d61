package main

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PodRecord is what the driver saw one pod do: only pods it finished itself (or added
// as an extra attempt) and then saw in a terminal phase are recorded.
type PodRecord struct {
	Batch  int
	Job    string
	JobUID types.UID
	// Gen is the JobSet restart attempt of the pod's Job (0 for a plain Job).
	Gen   int
	Index int
	Pod   string
	UID   types.UID
	// Succeeded is the terminal phase: Succeeded (true) or Failed.
	Succeeded bool
	// Result is the kind of termination message the pod reported (ResultNone for none).
	Result string
	// Extra marks an attempt the driver added beside the Job controller's pods.
	Extra bool
}

// JobRecord is what the driver saw of one Job name: its identities in the order they
// appeared, the terminal condition each recorded, and which were seen and then gone.
type JobRecord struct {
	UIDs     []types.UID
	Terminal map[types.UID]string
	// Gone marks identities that the driver saw and later found missing.
	Gone map[types.UID]bool
}

// Current is the Job name's latest identity ("" if never seen).
func (j *JobRecord) Current() types.UID {
	if j == nil || len(j.UIDs) == 0 {
		return ""
	}
	return j.UIDs[len(j.UIDs)-1]
}

// See records an identity of the Job name, once.
func (j *JobRecord) See(uid types.UID) {
	for _, u := range j.UIDs {
		if u == uid {
			return
		}
	}
	j.UIDs = append(j.UIDs, uid)
}

// Expectation is the verdict the oracle expects of an account.
type Expectation struct {
	Accepted       bool
	Covered        int
	AcceptedShards int
	// Complete lists the targets (keys) whose record must say Complete: those of a Job
	// with a TTL that completed (the record must outlive the Job).
	Complete []string
}

func (e Expectation) String() string {
	return fmt.Sprintf("Accepted=%t covered=%d accepted=%d", e.Accepted, e.Covered, e.AcceptedShards)
}

// Expect computes an account's expected verdict from the driver's record alone: a shard
// is covered when a pod of its (current Job identity, index) succeeded, its result is
// accepted when such a pod reported a good result, and the account is Accepted when every
// shard is covered, every target's current identity terminated, and (when results are
// required) every shard's result accepted.
func Expect(b *BatchPlan, pods []PodRecord, jobs map[string]*JobRecord) Expectation {
	covered := map[int]bool{}
	accepted := map[int]bool{}
	terminated := true
	var complete []string
	for _, t := range b.Targets {
		cur := jobs[t.Job].Current()
		switch term := TerminalOf(b, t, pods, jobs); {
		case term == "":
			terminated = false
		case term == "Complete" && b.TTL != nil:
			complete = append(complete, t.Key)
		}
		for _, p := range pods {
			if p.Batch != b.Num || p.Job != t.Job || p.JobUID != cur || cur == "" || !p.Succeeded {
				continue
			}
			if p.Index < 0 || p.Index >= t.Indexes {
				continue
			}
			covered[t.FirstShard+p.Index] = true
			if p.Result == ResultGood {
				accepted[t.FirstShard+p.Index] = true
			}
		}
	}
	e := Expectation{Covered: len(covered), AcceptedShards: len(accepted), Complete: complete}
	e.Accepted = e.Covered == b.Shards && terminated && (!b.RequireResults || e.AcceptedShards == b.Shards)
	return e
}

// TerminalOf is the terminal condition of a target's current identity as the driver
// knows it: the one it saw, or, for a Job with a TTL that it saw go (the TTL controller
// deletes only finished Jobs; the soak deletes none) before it saw its condition,
// Complete when every index succeeded and Failed otherwise. "" while it runs.
func TerminalOf(b *BatchPlan, t Target, pods []PodRecord, jobs map[string]*JobRecord) string {
	rec := jobs[t.Job]
	cur := rec.Current()
	if cur == "" {
		return ""
	}
	if term := rec.Terminal[cur]; term != "" {
		return term
	}
	if b.TTL == nil || !rec.Gone[cur] {
		return ""
	}
	done := map[int]bool{}
	for _, p := range pods {
		if p.Batch == b.Num && p.Job == t.Job && p.JobUID == cur && p.Succeeded && p.Index >= 0 && p.Index < t.Indexes {
			done[p.Index] = true
		}
	}
	if len(done) == t.Indexes {
		return "Complete"
	}
	return "Failed"
}

// Observed is an account's verdict as the controller published it.
type Observed struct {
	Accepted       bool
	Covered        int
	AcceptedShards int
	// Reason and Message of the Accepted condition, for the report.
	Reason, Message string
	// Terminal is each target's recorded terminal condition, by target key.
	Terminal map[string]string
}

// Differences lists how an observed verdict differs from the expected one (none: right).
func Differences(want Expectation, got Observed) []string {
	var out []string
	if want.Accepted != got.Accepted {
		out = append(out, fmt.Sprintf("Accepted=%t, want %t (%s: %s)", got.Accepted, want.Accepted, got.Reason, got.Message))
	}
	if want.Covered != got.Covered {
		out = append(out, fmt.Sprintf("covered %d, want %d", got.Covered, want.Covered))
	}
	if want.AcceptedShards != got.AcceptedShards {
		out = append(out, fmt.Sprintf("accepted %d, want %d", got.AcceptedShards, want.AcceptedShards))
	}
	for _, key := range want.Complete {
		if got.Terminal[key] != "Complete" {
			out = append(out, fmt.Sprintf("target %s recorded %q, want Complete", key, got.Terminal[key]))
		}
	}
	return out
}

// ForgedCounted tells whether an account's verdict counted forged results: it accepts
// more shards than real pods reported good results for, or is Accepted when they do not
// make it so, or a chunk the manager signed holds a result of no pod (forgedInSigned).
// realAccepted is what the real pods' good results accept (the oracle's count, or, while
// the batch runs, the shards with a good result reported so far).
func ForgedCounted(realAccepted int, realVerdict bool, got Observed, forgedInSigned int) bool {
	return got.AcceptedShards > realAccepted || (got.Accepted && !realVerdict) || forgedInSigned > 0
}

// ReleasedEarly lists the pods that were released (their result finalizer gone) while
// some account that captures their result had not recorded it: recorded holds each
// capturing account's recorded pod UIDs, read after the pods were listed.
func ReleasedEarly(released []types.UID, recorded []map[types.UID]bool) []types.UID {
	var out []types.UID
	for _, uid := range released {
		for _, rec := range recorded {
			if !rec[uid] {
				out = append(out, uid)
				break
			}
		}
	}
	return out
}

// NamespaceStuck tells whether a deleted namespace broke its bound: its pods ended at
// podsEnded (zero: not yet), it was gone at gone (zero: not yet), judged at now. It is
// stuck when it stayed longer than NamespaceGoneWithin after its pods ended, or, its pods
// never ending, longer than NamespaceGoneWithin after the deletion began (deleted).
func NamespaceStuck(deleted, podsEnded, gone, now time.Time) bool {
	from := podsEnded
	if from.IsZero() {
		from = deleted
	}
	until := gone
	if until.IsZero() {
		until = now
	}
	if podsEnded.IsZero() && !gone.IsZero() {
		return false // gone with its pods: nothing waited
	}
	if podsEnded.IsZero() {
		// Its pods have not ended: the namespace waits on them (a worker's grace
		// period), not on batchledger, unless that goes on far longer.
		return until.Sub(from) > 4*NamespaceGoneWithin
	}
	return until.Sub(from) > NamespaceGoneWithin
}

// ResultCount is the result bookkeeping of one account.
type ResultCount struct {
	// Results is the number of succeeded pods that reported a result to an account that
	// requires results.
	Results int
	// Lost are those pods with no recorded result; Twice are pods recorded more than once.
	Lost, Twice []string
}

// CountResults sets the batch's reporting pods against the recorded results (entries per
// pod UID over the account's ShardResults).
func CountResults(b *BatchPlan, pods []PodRecord, recorded map[types.UID]int) ResultCount {
	var rc ResultCount
	if b.RequireResults {
		for _, p := range pods {
			if p.Batch != b.Num || !p.Succeeded || p.Result == ResultNone {
				continue
			}
			rc.Results++
			if recorded[p.UID] == 0 {
				rc.Lost = append(rc.Lost, p.Pod)
			}
		}
	}
	names := map[types.UID]string{}
	for _, p := range pods {
		names[p.UID] = p.Pod
	}
	for uid, n := range recorded {
		if n > 1 {
			name := names[uid]
			if name == "" {
				name = string(uid)
			}
			rc.Twice = append(rc.Twice, fmt.Sprintf("%s (%d times)", name, n))
		}
	}
	slices.Sort(rc.Twice)
	return rc
}
