// Package account is the pure accounting core of batchledger: it turns an account's
// mapping and the observations of its targets (Job snapshots, successful pods, Kueue
// Workloads, reported results) into the account status and its verdicts. It makes no
// client calls, so every rule of the batch semantics is pinned by table tests.
//
// The three observations stay separate: controller membership (completedIndexes),
// terminal status (Complete/Failed conditions) and application acceptance (results).
// Coverage never implies termination; termination never implies acceptance.
package account

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/identity"
	"batchledger.dev/batchledger/pkg/indexset"
)

// Bounds that keep the account object small whatever the batch size; limitsFor lowers
// some of them for accounts of many targets.
const (
	// maxHistory bounds the superseded identities kept beside those a target still
	// needs (pendingHistory).
	maxHistory       = 64
	maxLedger        = 256
	maxCoveredBy     = 256
	maxRejections    = 32
	maxProblems      = 16
	messageRunsLimit = 5
)

// Input is everything the account is computed from.
type Input struct {
	// Namespace of the account; targets must live there.
	Namespace string
	// Generation of the account's spec.
	Generation int64
	Spec       *v1alpha1.BatchAccountSpec
	// Mapping is Spec compiled (Compile(Namespace, Spec)) when the caller has it already,
	// as the reconciler does to observe the targets; nil compiles it here. The spec's
	// JudgingDigest is taken from it too. It is only read.
	Mapping *Mapping
	// Previous is the account's last written status: the durable memory of identities,
	// attempts and condition transition times.
	Previous *v1alpha1.BatchAccountStatus
	// Observations of the targets by target key; a missing key means not found.
	Observations map[string]Observation
	// Results reported by workers, in the order they were recorded (first first).
	Results []Result
	// Now is the observation time, used for transitions and history.
	Now metav1.Time
	// RuleError, when set, is why spec.acceptance.rule does not compile in this
	// controller (e.g. after an upgrade). Results are then not judged: ResultsAccepted
	// and Accepted are False (RuleInvalid) until the rule is fixed; the caller keeps the
	// results raw and the pods held meanwhile. An Accepted batch (Final) keeps its
	// verdict: its results were judged when the rule compiled.
	RuleError string
	// ResultsUnreadable, when set, is why the recorded results cannot be read now (the
	// result signing key does not load). Nothing is judged anew: the previous results
	// and accepted shards stand, and ResultsAccepted stays True if it was while every
	// target keeps the identity they were judged on, else says why it waits; the rest
	// of the status (the targets, a Job's end) is still observed.
	ResultsUnreadable string
}

// Output is the computed account.
type Output struct {
	Status  v1alpha1.BatchAccountStatus
	Mapping *Mapping
	// Changed lists the condition types whose status or reason changed from Previous:
	// the verdict changes worth an event.
	Changed []metav1.Condition
	// AheadOfJobs is true when Status differs from Previous only by attempts read from
	// succeeded pods, and the Job controller has not counted some of those pods yet
	// (PodAttempt.Uncounted). The Job controller's next status write counts them
	// and wakes the account again, so writing now would cost one more status write per
	// pod batch for nothing a reader of the account needs sooner (see aheadOfJobs).
	AheadOfJobs bool
}

// targetState is one target's current identity and what it covers.
type targetState struct {
	key      string
	obs      Observation
	facts    jobFacts
	found    bool
	problems []Problem
	// mapped are the indexes the mapping assigns on this target.
	mapped indexset.Set
	// covered are mapped indexes the current identity completed.
	covered indexset.Set
	// deleted is true when the identity's Job was observed before and is gone now: its
	// record (the previous status) stands for it.
	deleted bool
	record  *v1alpha1.TargetStatus
	// coverageLost is true for a deleted record whose completed indexes were left out of
	// the status for size and cannot be reconstructed.
	coverageLost bool
	// everObserved is false for a target never seen by this account (no identity, no
	// history): it may not exist yet, or may have been deleted before the account.
	everObserved bool
}

// uid is the identity's Job UID: the observed Job's, or the record's when deleted.
func (ts *targetState) uid() types.UID {
	switch {
	case ts.found:
		return ts.obs.Job.UID
	case ts.deleted:
		return ts.record.UID
	}
	return ""
}

// final is true when the identity can report no further result: its Job was deleted
// (and its results are not read from a MultiKueue worker), or it terminated and its pods
// were listed (so a completed index without a pod has lost its result for good).
func (ts *targetState) final() bool {
	if ts.deleted && ts.obs.ResultsOnWorker && !ts.obs.PodsListed {
		// Its pods ran on a MultiKueue worker whose records are still read: results
		// recorded there may still come, as for a dispatched Job that terminated.
		return false
	}
	return ts.deleted || (ts.found && ts.facts.terminal != "" && ts.obs.PodsListed)
}

// endedBy says, for a JobSet child deleted because its JobSet ended, how it ended: " (its
// JobSet Failed)"; empty otherwise.
func (ts *targetState) endedBy() string {
	switch e := ts.obs.OwnerEnded; e {
	case "":
		return ""
	case OwnerDeleted, OwnerBeingDeleted:
		return " (its JobSet was " + e + ")"
	default:
		return " (its JobSet " + e + ")"
	}
}

// awaitsOwner is true for a child Job that ended (Failed, or Complete) while its owner
// (the JobSet, the TrainJob) has not: a failure of any of its children may make the
// owner restart them all, the Complete ones too (new identities, their indexes run
// again), so the batch has not terminated until the owner ends, and a verdict reached
// before would not be final. That holds of its record once it is deleted too: a restart
// deletes the children before it creates the next (all of them first with
// BlockingRecreate, and with startupPolicy InOrder a later replicatedJob's only once the
// earlier ones run).
func (ts *targetState) awaitsOwner() bool {
	return (ts.found || ts.deleted) && ts.facts.terminal != "" && ts.obs.ChildOwner == OwnerRunning
}

// lostBeforeTerminal is true for a deleted identity that never terminated, and for a
// JobSet child this account never observed whose JobSet ended (neverCreated): neither
// can complete any more.
func (ts *targetState) lostBeforeTerminal() bool {
	return (ts.deleted && ts.facts.terminal == "") || ts.neverCreated()
}

// onUnreadWorker says, of a target not found that is a child of an owner MultiKueue
// dispatched to a worker whose records batchledger cannot read (Observation.WorkerProblem),
// where it waits and why ("" for any other target): the child may have run there to its
// end, so it is neither missing nor never created.
func (ts *targetState) onUnreadWorker() string {
	w := ts.obs.Workload
	if ts.found || ts.deleted || !ts.obs.ResultsOnWorker || ts.obs.WorkerProblem == "" || w == nil || w.Cluster == "" {
		return ""
	}
	return v1alpha1.TargetKey(ts.key).Describe() + " pending on MultiKueue worker cluster " + w.Cluster + ": " + ts.obs.WorkerProblem
}

// neverCreated is true for a JobSet child target without an identity or a record whose
// JobSet ended: it will not be created any more.
func (ts *targetState) neverCreated() bool {
	return !ts.found && !ts.deleted && ts.obs.OwnerEnded != ""
}

// settleWorkload keeps the Workload as recorded once the Job's terminal condition is on
// record. The terminal condition decided the account; what Kueue writes on the Workload
// afterwards (Finished, its retention policy deleting it) is no accounting fact, and
// following it cost one more status write per Job after the verdict, or turned Admitted
// Unknown when a finished Workload was deleted. A Workload of another UID is still
// observed: that is a new admission, not the end of the old one.
func (ts *targetState) settleWorkload(prev *v1alpha1.TargetStatus) {
	if !ts.found || ts.facts.terminal == "" || prev == nil || prev.Terminal == "" ||
		prev.UID != ts.obs.Job.UID || prev.Workload == nil {
		return
	}
	if w := ts.obs.Workload; w != nil && w.UID != prev.Workload.UID {
		return
	}
	ts.obs.Workload = prev.Workload.DeepCopy()
}

// atTerminalSize reads a Job whose end is on record (prev, its previous status, recorded
// its terminal condition) at the size it ended at. The API server lets an Indexed Job's
// completions change with its parallelism after it finished, but the Job controller acts
// on no finished Job: its completed and failed indexes stay as they were. Read at a new
// size, real completions past it would be dropped (and their results with them), or
// indexes never to run would read as unmapped work, taking back a final verdict.
func atTerminalSize(prev *v1alpha1.TargetStatus, obs Observation) Observation {
	j := obs.Job
	// A record without completions (a status written by hand) knows no size.
	if j == nil || prev == nil || prev.UID != j.UID || prev.Terminal == "" || prev.NotIndexed || prev.Completions <= 0 || prev.Completions == j.Completions {
		return obs
	}
	ended := *j
	ended.Completions = prev.Completions
	obs.Job = &ended
	return obs
}

// ownersSeen names the owners (a JobSet, a TrainJob: by target kind and name) of which
// this account has seen a child: one observed now while its owner is there, or an
// identity on record or in history (recordStands); or that it saw end without creating a
// child (TargetStatus.OwnerEndedSeen). An owner that is not found is taken
// as deleted only if it was seen; the account cannot tell one never created from one
// created and deleted unseen (while the manager was down all its life), and waits for
// both.
func ownersSeen(m *Mapping, obs map[string]Observation, prev map[string]*v1alpha1.TargetStatus, inHistory map[string]bool) map[string]bool {
	seen := map[string]bool{}
	for _, t := range m.Targets {
		if !t.Ref.IsChild() {
			continue
		}
		p := prev[t.Key]
		if o := obs[t.Key]; o.Job != nil && o.ChildOwner != OwnerDeleted || inHistory[t.Key] || (p != nil && (p.UID != "" || p.OwnerEndedSeen)) {
			seen[ownerOf(t.Ref)] = true
		}
	}
	return seen
}

// ownerOf names a child target's owner across kinds: "jobset/train", "trainjob/llm".
func ownerOf(ref v1alpha1.TargetRef) string { return ref.Kind() + "/" + ref.Owner() }

// Final reports whether st says Accepted=True of spec, of generation: the verdict is
// final until the spec changes what judges the batch, and the account follows none but
// the identities on its record (recordStands). A spec of another generation that judges
// as the one of the verdict did (st.JudgedSpec: only ttlSecondsAfterFinished changed)
// keeps it final: a retention setting edited on an Accepted account would otherwise
// make it follow a Job re-run under a target's name, another batch's, and take its
// verdict back.
func Final(st *v1alpha1.BatchAccountStatus, spec *v1alpha1.BatchAccountSpec, generation int64) bool {
	return finalUnder(st, generation, func() string {
		if spec == nil {
			return ""
		}
		return spec.JudgingDigest()
	})
}

// finalUnder is Final of the spec of generation whose JudgingDigest digest returns:
// Compute has it from the mapping, others compute it.
func finalUnder(st *v1alpha1.BatchAccountStatus, generation int64, digest func() string) bool {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	// The digest is asked for only for a spec changed since the verdict: rare.
	return c.ObservedGeneration == generation || st.JudgedSpec != "" && st.JudgedSpec == digest()
}

// RunRef is what a Job's run is known by to an account: the Job's UID, or the Kueue
// Workload it runs under (a JobSet's or TrainJob's is its owner's, not a child Job's).
// The zero RunRef is a Job not created yet, whose UID is not known.
type RunRef struct {
	// Job is the UID of the Job.
	Job types.UID
	// WorkloadUID and WorkloadName are the Workload's, for a run known by its Workload.
	WorkloadUID  types.UID
	WorkloadName string
}

// Follows reports whether the account ba follows run. An account that is not Final
// follows every Job its targets name (a re-run before the verdict is a new identity of
// its target); an Accepted one follows none but the identities on its record
// (recordStands): a target's current identity or a superseded one in history
// (OnRecord), or the Workload a target's record names. A Job re-run under a target's name
// since, or its Workload, is another batch's: the account counts, captures, holds and
// tells nothing of it, and speaks for nothing there.
func Follows(ba *v1alpha1.BatchAccount, run RunRef) bool {
	switch {
	case !Final(&ba.Status, &ba.Spec, ba.Generation):
		return true
	case run.Job != "":
		return OnRecord(&ba.Status, run.Job)
	case run.WorkloadUID == "" && run.WorkloadName == "":
		return false // a Job being created is on no record
	}
	return slices.ContainsFunc(ba.Status.Targets, func(t v1alpha1.TargetStatus) bool {
		// A record written without the Workload's UID names it by name.
		w := t.Workload
		return w != nil && (w.UID != "" && w.UID == run.WorkloadUID || w.UID == "" && w.Name == run.WorkloadName)
	})
}

// OnRecord reports whether the Job of UID job is an identity on the record of status st,
// whatever its verdict: a target's current identity, or a superseded one in history.
func OnRecord(st *v1alpha1.BatchAccountStatus, job types.UID) bool {
	return slices.ContainsFunc(st.Targets, func(t v1alpha1.TargetStatus) bool { return t.UID == job }) ||
		slices.ContainsFunc(st.History, func(h v1alpha1.SupersededIdentity) bool { return h.UID == job })
}

// recordStands is what the account reads of a target's observation (p is the target's
// previous status; inHistory is true when a superseded identity of it is in history).
// Once no owner can create a next identity of the target, a Job of its name that is not
// the identity on record is another's (a Job re-run under the name, a child made by an
// owner of the same name applied again, whatever its labels and owner reference say):
// the record stands, as for a Job deleted. No owner can, when
//   - the batch is Accepted (final): nothing but a change of its spec takes the verdict
//     back. Its owners had ended (a child awaits a running one, awaitsOwner) and an owner
//     that ended creates no Job any more, so an owner of the same name running now is
//     another object: the target's owner stays ended, and a child never created stays so;
//   - the owner of a target seen before (on record, or in history) is gone.
func recordStands(t Target, p *v1alpha1.TargetStatus, obs Observation, final, inHistory bool) Observation {
	recorded := p != nil && p.UID != ""
	if final && obs.ChildOwner == OwnerRunning {
		obs.ChildOwner = OwnerDeleted
	}
	ownerGone := obs.ChildOwner == OwnerDeleted && (inHistory || recorded)
	if obs.Job != nil && t.Ref.IsChild() && obs.ChildOwner == OwnerDeleted && !inHistory && !recorded && !final {
		// A child first seen when its owner is gone: nothing vouches that the owner made
		// it. Anyone who may create Jobs can give one the child's name, labels and a
		// controller reference to an owner of that name, and so stand in for an owner
		// that never ran (one the account was written before) or never ran the child.
		// The target waits for its owner, as one never found does (ownersSeen).
		obs = Observation{ChildOwner: obs.ChildOwner, OwnerEnded: OwnerDeleted}
	}
	if j := obs.DeletedJob; j != nil && (final || ownerGone) && (!recorded || j.UID != p.UID) {
		// A Job of another identity given as deleted is no more the target's than one
		// found: it would otherwise replace the record (unseenRecord).
		obs.DeletedJob = nil
	}
	if obs.Job != nil && (final || ownerGone) && (!recorded || obs.Job.UID != p.UID) {
		obs = Observation{ChildOwner: obs.ChildOwner}
		if !final {
			obs.OwnerEnded = OwnerDeleted
		}
	}
	if final && t.Ref.IsChild() && obs.Job == nil && !recorded && obs.OwnerEnded == "" {
		obs.OwnerEnded = cmp.Or(obs.ChildOwner, OwnerDeleted)
	}
	if final && obs.Job == nil && obs.Workload != nil && !recordedWorkload(p, obs.Workload) {
		// A Workload observed without a Job (a dispatched child's owner's) that is not
		// the record's is that of an owner created again under the name: the batch ran
		// under the one on record, and this one, and where it runs, is another batch's.
		obs.Workload = nil
		obs.Redispatched, obs.ResultsOnWorker, obs.WorkerProblem = false, false, ""
	}
	return obs
}

// recordedWorkload reports whether w is the Workload target status p records (by UID, or
// by name for a record written without it).
func recordedWorkload(p *v1alpha1.TargetStatus, w *v1alpha1.WorkloadObservation) bool {
	if p == nil || p.Workload == nil {
		return false
	}
	if p.Workload.UID != "" {
		return p.Workload.UID == w.UID
	}
	return p.Workload.Name == w.Name
}

// Compute derives the account status from its input.
func Compute(in Input) Output {
	prev := in.Previous
	if prev == nil {
		prev = &v1alpha1.BatchAccountStatus{}
	}
	m := in.Mapping
	if m == nil {
		m = Compile(in.Namespace, in.Spec)
	}
	st := v1alpha1.BatchAccountStatus{ObservedGeneration: in.Generation, JudgedSpec: m.JudgingDigest(), History: slices.Clone(prev.History)}
	prevTargets := map[string]*v1alpha1.TargetStatus{}
	for i := range prev.Targets {
		prevTargets[prev.Targets[i].Name] = &prev.Targets[i]
	}
	inHistory := map[string]bool{}
	for _, h := range prev.History {
		inHistory[h.Target] = true
	}

	seenOwners := ownersSeen(m, in.Observations, prevTargets, inHistory)
	final := finalUnder(prev, in.Generation, m.JudgingDigest)
	problems := slices.Clone(m.Problems)
	lim := statusLimits(len(m.Targets))
	states := make([]*targetState, len(m.Targets))
	// prevOf[i] is the previous status of target i's current identity (nil if new).
	prevOf := make([]*v1alpha1.TargetStatus, 0, len(m.Targets))
	for i, t := range m.Targets {
		obs := recordStands(t, prevTargets[t.Key], in.Observations[t.Key], final, inHistory[t.Key])
		obs = atTerminalSize(prevTargets[t.Key], obs)
		ts := targetStateOf(t, obs)
		if ts.obs.OwnerEnded == OwnerDeleted && !seenOwners[ownerOf(t.Ref)] && !final {
			// Nothing says this owner ever existed: an account written before its JobSet
			// (or TrainJob) waits for it, as for a Job not created yet.
			ts.obs.OwnerEnded = ""
		}
		ts.obs.Workload = boundWorkload(ts.obs.Workload, lim)
		p := prevTargets[t.Key]
		if !ts.found {
			if rec, superseded := unseenRecord(t, p, ts.obs, in.Now, lim); rec != nil {
				if superseded != nil {
					st.History = append(st.History, *superseded)
				} else if at := revivedIdentity(t, p, ts.obs.DeletedJob, st.History); at >= 0 {
					st.History = slices.Delete(st.History, at, at+1)
				}
				ts.fromRecord(rec)
			} else if keepsRecord(t, p, ts.obs) {
				ts.fromRecord(finalRecord(t, p, ts.obs, in.Now, lim))
			} else if rec, at := endedRecord(t, ts.obs, st.History); rec != nil {
				// Its JobSet ended after a reconcile had taken the child's disappearance for
				// a restart: no successor came, so the identity is the target's record again.
				st.History = slices.Delete(st.History, at, at+1)
				ts.fromRecord(rec)
			}
		} else if at := revivedIdentity(t, p, ts.obs.Job, st.History); at >= 0 {
			// The same Job found again after a reconcile had taken its absence for a
			// restart in progress: nothing replaced it, so it is no new identity.
			st.History = slices.Delete(st.History, at, at+1)
		}
		ts.everObserved = ts.found || inHistory[t.Key] || (p != nil && p.UID != "")
		ts.settleWorkload(p)
		states[i] = ts
		problems = append(problems, ts.problems...)
		status, superseded, identityPrev := targetStatus(ts, p, in.Now, lim)
		if superseded != nil {
			st.History = append(st.History, *superseded)
		}
		boundTarget(&status, lim)
		st.Targets = append(st.Targets, status)
		prevOf = append(prevOf, identityPrev)
	}
	st.HistoryDropped = prev.HistoryDropped
	boundHistory(&st, lim)
	// Two targets that reach one Job (one spelled by name, one as a JobSet child) claim
	// its identities twice: the mapping is invalid, and those identities count for neither.
	shared := findSharedIdentities(m, states, st.History)
	if len(shared.problems) > 0 {
		problems = slices.Insert(problems, len(m.Problems), shared.problems...)
		for i, msgs := range shared.ofTarget {
			for _, msg := range msgs {
				addProblem(&st.Targets[i], msg, lim)
			}
		}
		shared.exclude(states)
		in.Results = shared.rejectResults(in.Results)
	}
	valid := len(problems) == 0

	cov := coverage(m, states)
	if final {
		cov.coveredAsJudged(m, states)
	}
	st.Shards = v1alpha1.ShardSummary{
		Total:           int32(m.Shards.Count()),
		Covered:         int32(cov.covered.Count()),
		Missing:         m.Shards.Describe(cov.missing, 8),
		MissingOrdinals: cov.missing.String(),
		CoveredBy:       cov.coveredBy,
		// Every shard covered only by repair has a repair identity that covered it.
		CoveredByDropped: int32(cov.byRepairOnly.Count() - len(cov.coveredBy)),
	}
	res := judgeResults(m, states, cov.mayCover, in)
	st.Shards.Accepted = int32(res.accepted.Count())
	if res.unreadable != "" && res.judgedOn {
		st.Shards.Accepted = prev.Shards.Accepted
	}
	st.Results = res.summary
	boundRejections(&st.Results)
	st.Shards.Progress = progress(st.Shards, in.Spec.RequiresResults())
	keep := requiredKept{targets: requiredNeeded(states), history: historyRequiredNeeded(&st, states)}
	fitIndexLists(&st, indexBudget(&st, lim, keep), keep)
	// Only now, with the lists as they will be written, can a target be compared with
	// its previous status: an unchanged target keeps its observation point.
	for i := range st.Targets {
		keepObservationPoints(&st.Targets[i], prevOf[i])
	}

	conds := []metav1.Condition{
		assignmentCondition(problems),
		admittedCondition(states),
		coveredCondition(m, states, cov, valid),
		terminatedCondition(m, states, cov),
		resultsCondition(m, in.Spec, res, cov, states),
	}
	conds = append(conds, acceptedCondition(conds, in.Spec, !cov.byRepairOnly.IsEmpty()))
	out := Output{Mapping: m}
	st.Conditions = slices.Clone(prev.Conditions)
	for _, c := range conds {
		c.Message = boundMessage(c.Message)
		c.ObservedGeneration = in.Generation
		c.LastTransitionTime = in.Now
		old := meta.FindStatusCondition(prev.Conditions, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason {
			out.Changed = append(out.Changed, c)
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	out.Status = st
	out.AheadOfJobs = aheadOfJobs(prev, &st, states)
	return out
}

// requiredNeeded marks, by position, the targets whose required indexes the mapping is
// checked against differently once they are left out of the status (fitIndexLists): a
// record reads back every index below its completions for a Job without a
// successPolicy, and none for one with a policy (fromRecord). For those, nothing but the
// status's list says that the mapping leaves a required index unassigned
// (UnmappedIndexes) once the Job is deleted.
func requiredNeeded(states []*targetState) []bool {
	out := make([]bool, len(states))
	for i, ts := range states {
		f := &ts.facts
		if !(ts.found || ts.deleted) || !f.indexed {
			continue
		}
		back := requiredReadBack(f.successPolicy, f.completions)
		out[i] = !back.Difference(ts.mapped).Equal(f.required.Difference(ts.mapped))
	}
	return out
}

// aheadOfJobs reports whether now differs from prev only by the attempt fields of targets
// with a successful pod the Job controller has not counted yet: its count is a later Job
// status write, which wakes the account and carries these attempts.
func aheadOfJobs(prev, now *v1alpha1.BatchAccountStatus, states []*targetState) bool {
	if len(prev.Targets) != len(now.Targets) {
		return false
	}
	cur := *now
	cur.Targets = slices.Clone(now.Targets)
	ahead := false
	for i := range cur.Targets {
		t, p := &cur.Targets[i], &prev.Targets[i]
		if t.Name != p.Name || t.UID != p.UID {
			return false
		}
		if t.SuccessfulAttempts == p.SuccessfulAttempts && t.RepeatedIndexes == p.RepeatedIndexes &&
			t.AttemptLedgerDropped == p.AttemptLedgerDropped && t.AttemptsUnledgered == p.AttemptsUnledgered &&
			equality.Semantic.DeepEqual(t.AttemptLedger, p.AttemptLedger) {
			continue
		}
		if !states[i].found || !slices.ContainsFunc(states[i].obs.SuccessfulPods, func(a PodAttempt) bool { return a.Uncounted }) {
			return false
		}
		ahead = true
		t.SuccessfulAttempts, t.RepeatedIndexes, t.AttemptLedger = p.SuccessfulAttempts, p.RepeatedIndexes, p.AttemptLedger
		t.AttemptLedgerDropped, t.AttemptsUnledgered = p.AttemptLedgerDropped, p.AttemptsUnledgered
		t.ObservedResourceVersion = p.ObservedResourceVersion
	}
	return ahead && equality.Semantic.DeepEqual(&cur, prev)
}

// targetStateOf builds a target's state from its observation alone: the Job's facts,
// the mapped indexes it covered and what is wrong with its mapping. It is pure:
// pkg/controller's observeTarget is what reads the cluster.
func targetStateOf(t Target, obs Observation) *targetState {
	ts := &targetState{key: t.Key, obs: obs, found: obs.Job != nil, mapped: t.Indexes}
	if !ts.found {
		return ts
	}
	ts.facts = readJob(obs.Job)
	ts.problems = shapeProblems(t.Key, t.Indexes, &ts.facts)
	if ts.facts.indexed {
		ts.covered = ts.facts.completed.Intersect(t.Indexes)
	}
	return ts
}

// shapeProblems are the problems of mapping indexes of the target key onto a Job of facts
// f: a Job that is not Indexed, indexes beyond its completions, indexes its own criterion
// requires that no shard is assigned. They hold of a Job as observed and of its record
// once it is deleted (a deletion changes nothing).
func shapeProblems(key string, mapped indexset.Set, f *jobFacts) []Problem {
	name := v1alpha1.TargetKey(key).Describe()
	if !f.indexed {
		return []Problem{problemf(v1alpha1.ReasonNotIndexed,
			"%s is not an Indexed Job (completionMode Indexed): its pods have no completion index to assign", name)}
	}
	var out []Problem
	if max, ok := mapped.Max(); ok && max >= f.completions {
		beyond := mapped.Difference(indexset.Range(0, f.completions-1))
		// An Indexed Job may have one completion, or none (it then runs nothing).
		span := fmt.Sprintf("indexes 0-%d", f.completions-1)
		switch f.completions {
		case 0:
			span = "no index"
		case 1:
			span = "index 0"
		}
		out = append(out, problemf(v1alpha1.ReasonIndexOutOfRange,
			"%s has %d %s (%s) but the mapping assigns indexes %s", name, f.completions, plural(f.completions, "completion", "completions"), span, beyond))
	}
	if unmapped := f.required.Difference(mapped); !unmapped.IsEmpty() {
		out = append(out, problemf(v1alpha1.ReasonUnmappedIndexes,
			"%s requires indexes %s but the mapping assigns no shard to %s: their work would be unaccounted", name, f.required, unmapped))
	}
	return out
}

// targetStatus renders one target and, when its identity changed, the superseded one.
// The third result is the previous status of the current identity (nil when the identity
// is new), for keepObservationPoints.
func targetStatus(ts *targetState, prev *v1alpha1.TargetStatus, now metav1.Time, lim limits) (v1alpha1.TargetStatus, *v1alpha1.SupersededIdentity, *v1alpha1.TargetStatus) {
	if ts.deleted {
		// The record stands: what was last observed of the identity, marked deleted.
		s := *ts.record.DeepCopy()
		s.Found, s.Deleted = false, true
		if s.DeletedAt == nil {
			s.DeletedAt = now.DeepCopy()
		}
		return s, nil, ts.record
	}
	s := v1alpha1.TargetStatus{Name: ts.key, Found: ts.found}
	for _, p := range ts.problems {
		addProblem(&s, p.Message, lim)
	}
	var uid types.UID
	if ts.found {
		uid = ts.obs.Job.UID
	}
	var superseded *v1alpha1.SupersededIdentity
	if prev != nil && prev.UID != "" && prev.UID != uid {
		// The required indexes of a Job without a successPolicy, left out for size, are
		// every index below its completions (fromRecord): history keeps them so, not the
		// policy's of another Job that a record made back from it cannot tell apart. A
		// policy's left out while the mapping left some unassigned stay flagged so.
		required, omitted := prev.Required, slices.Contains(prev.IndexesOmitted, "required")
		if back := requiredReadBack(prev.SuccessPolicy, int(prev.Completions)); omitted && !back.IsEmpty() {
			required, omitted = back.String(), false
		}
		superseded = &v1alpha1.SupersededIdentity{
			Target: ts.key, Job: prev.Job, UID: prev.UID, RestartAttempt: prev.RestartAttempt,
			Completions: prev.Completions, CompletedIndexes: prev.CompletedIndexes, CompletedIndexesOmitted: prev.CompletedIndexesOmitted,
			Terminal: prev.Terminal, NotIndexed: prev.NotIndexed, Required: required, RequiredOmitted: omitted,
			RequiredUnmapped: omitted && prev.RequiredUnmapped, SupersededAt: now,
		}
		prev = nil // a new identity starts with no attempts of its own
	}
	if !ts.found {
		if why := ts.obs.notServed(); why != "" {
			s.Problems = append(s.Problems, clipMessage(why, maxProblemMessage))
		}
		// Remembered for when the owner is deleted (ownersSeen): an owner seen ended
		// creates no child any more, gone or not.
		s.OwnerEndedSeen = ts.neverCreated()
		return s, superseded, prev
	}
	job, f := ts.obs.Job, &ts.facts
	s.Job = job.Name
	s.UID = job.UID
	s.RestartAttempt = ts.obs.RestartAttempt
	s.Completions = int32(f.completions)
	s.NotIndexed = !f.indexed
	s.PodScope = job.PodScope
	s.TerminationGracePeriodSeconds = job.TerminationGracePeriodSeconds
	s.SuccessPolicy = clipMessage(f.successPolicy, maxSuccessPolicy)
	s.Required = f.required.String()
	s.CompletedIndexes = f.completed.String()
	s.FailedIndexes = f.failed.String()
	s.Succeeded = job.Succeeded
	s.StartedAt = startedAt(prev, job)
	s.Terminal = f.terminal
	s.TerminalReason = clipMessage(f.reason, maxReason)
	s.TerminalObservedAt = f.terminalAt
	s.SuccessCriteriaMet = f.criteriaMet
	s.ObservedResourceVersion = job.ResourceVersion
	s.Workload = ts.obs.Workload
	for _, ig := range f.ignored {
		addProblem(&s, "ignored corrupt Job status interval "+ig, lim)
	}
	attempts(&s, prev, ts.obs.SuccessfulPods, f.completed)
	if prev != nil && f.failed.IsEmpty() && slices.Contains(prev.IndexesOmitted, "failedIndexes") {
		// A Job's failed indexes never go away: given none after they were left out for
		// size, this identity's Job is its record made back from the status (a
		// MultiKueue worker not read now), which cannot say them. They stay left out
		// rather than read as none.
		s.IndexesOmitted = append(s.IndexesOmitted, "failedIndexes")
	}
	s.Admissions, s.AdmissionsDropped = admissions(prev, ts.obs.Workload, f.completed, job.Succeeded, now, lim)
	return s, superseded, prev
}

// startedAt is when the identity first started: prev's record of it (prev is nil for a
// new identity), else the Job's start. A suspension (Kueue's preemption) clears the Job's
// startTime; the pods it ran were told their shards all the same.
func startedAt(prev *v1alpha1.TargetStatus, job *identity.Job) *metav1.Time {
	if prev != nil && prev.StartedAt != nil {
		return prev.StartedAt
	}
	return job.StartTime.DeepCopy()
}

// keepObservationPoints keeps the previous resourceVersions when nothing the account
// reports of the Job or the Workload changed. An observation point is where the reported
// facts were read; a newer resourceVersion with the same facts (a label, a finalizer, or
// batchledger's own conditions on the Workload) is no new observation, and recording it
// would turn every write of ours into another status write.
func keepObservationPoints(s *v1alpha1.TargetStatus, prev *v1alpha1.TargetStatus) {
	if prev == nil {
		return
	}
	if prev.Workload != nil && s.Workload != nil {
		w := *s.Workload
		w.ObservedResourceVersion = prev.Workload.ObservedResourceVersion
		if equality.Semantic.DeepEqual(&w, prev.Workload) {
			s.Workload = &w
		}
	}
	cur := *s
	cur.ObservedResourceVersion = prev.ObservedResourceVersion
	if equality.Semantic.DeepEqual(&cur, prev) {
		s.ObservedResourceVersion = prev.ObservedResourceVersion
	}
}

// attempts merges the pods seen now into the ledger of repeated indexes and sets s's
// attempt fields. Attempts are counted per pod, indexes per index: five pods on 0,1,1,2,2
// are five attempts over {0,1,2}. The ledger is whole here; boundTarget folds what does
// not fit (foldLedger) into AttemptsUnledgered. A repeated index the ledger left out
// (in RepeatedIndexes, not in the ledger) is counted once plus its folded repeats: its
// pods seen again are not counted again.
func attempts(s *v1alpha1.TargetStatus, prev *v1alpha1.TargetStatus, pods []PodAttempt, completed indexset.Set) {
	var folded indexset.Set
	var unledgered, dropped int32
	known := true // whether folded is known: prev's repeated indexes were written
	if prev != nil {
		unledgered, dropped = prev.AttemptsUnledgered, prev.AttemptLedgerDropped
		was, err := indexset.Parse(prev.RepeatedIndexes)
		known = err == nil && !slices.Contains(prev.IndexesOmitted, "repeatedIndexes")
		if !known {
			dropped = prev.AttemptLedgerDropped
		}
		if known {
			ledgered := make([]int, len(prev.AttemptLedger))
			for i, e := range prev.AttemptLedger {
				ledgered[i] = int(e.Index)
			}
			folded = was.Difference(indexset.Of(ledgered...))
			// Statuses written before the count was kept left entries out uncounted.
			dropped = int32(folded.Count())
		}
	}
	// When prev's repeated indexes were left out for size, which indexes were folded is
	// not known: then only the ledger's indexes take repeats, so that no pod is counted
	// twice (a new repeat of another index goes uncounted).
	ledgerOnly := !known && dropped > 0
	inLedger := map[int]bool{}
	if prev != nil {
		for _, e := range prev.AttemptLedger {
			inLedger[int(e.Index)] = true
		}
	}
	byIndex := map[int][]types.UID{}
	var order []int
	add := func(i int, uid types.UID) {
		if folded.Contains(i) || (ledgerOnly && !inLedger[i]) {
			return
		}
		if _, ok := byIndex[i]; !ok {
			order = append(order, i)
		}
		if !slices.Contains(byIndex[i], uid) {
			byIndex[i] = append(byIndex[i], uid)
		}
	}
	if prev != nil {
		for _, e := range prev.AttemptLedger {
			for _, uid := range e.Pods {
				add(int(e.Index), uid)
			}
		}
	}
	for _, p := range pods {
		add(p.Index, p.UID)
	}
	slices.Sort(order)
	var ledger []v1alpha1.IndexAttempts
	var repeated []int
	extra := 0
	for _, i := range order {
		uids := byIndex[i]
		if len(uids) < 2 {
			continue
		}
		repeated = append(repeated, i)
		extra += len(uids) - 1
		ledger = append(ledger, v1alpha1.IndexAttempts{Index: int32(i), Pods: uids})
	}
	total := int32(completed.Union(indexset.Of(order...)).Union(folded).Count() + extra)
	if known || ledgerOnly {
		total += unledgered
	}
	if prev != nil && prev.SuccessfulAttempts > total {
		// Attempts already counted stay counted even when their pods are gone.
		total = prev.SuccessfulAttempts
	}
	repeatedSet := indexset.Of(repeated...).Union(folded)
	if !known {
		// Once left out for size the list stays out: the repeats seen before are not
		// known any more, and a partial list would read as whole.
		repeatedSet = indexset.Set{}
		s.IndexesOmitted = append(s.IndexesOmitted, "repeatedIndexes")
	}
	s.AttemptLedger, s.SuccessfulAttempts, s.RepeatedIndexes = ledger, total, repeatedSet.String()
	s.AttemptLedgerDropped, s.AttemptsUnledgered = dropped, unledgered
}

// coverageState is which shards the current identities cover.
type coverageState struct {
	covered   indexset.Set
	missing   indexset.Set
	coveredBy []v1alpha1.ShardCoverage
	// byRepairOnly are shards covered only through repair identities.
	byRepairOnly indexset.Set
	// mayCover are the shards an identity may still cover: one of its mapped indexes may
	// still run (targetState.mayRun).
	mayCover indexset.Set
}

// awaitsRepair is true for a target that will never terminate (lostBeforeTerminal) whose
// missing shards each have another identity that may still cover them (a repair): the
// batch waits for those, it is not blocked by this target.
func (c *coverageState) awaitsRepair(m *Mapping, ts *targetState) bool {
	if !ts.lostBeforeTerminal() {
		return false
	}
	own := m.ShardsOfAny(ts.key, ts.mapped).Intersect(c.missing)
	return !own.IsEmpty() && own.Difference(c.mayCover).IsEmpty()
}

// failedNote says of a Job that has not terminated which of its mapped indexes failed
// (backoffLimitPerIndex) with their shards still missing, and what to do: the Job will
// not run them again, so waiting for it is no plan. "" when none did. A failed index
// whose shard another identity covered is left out: nothing waits for it.
func (c *coverageState) failedNote(m *Mapping, ts *targetState) string {
	failed := ts.facts.failed.Intersect(ts.mapped).Intersect(m.IndexesOf(ts.key, c.missing))
	if failed.IsEmpty() {
		return ""
	}
	shards := m.ShardsOfAny(ts.key, failed).Intersect(c.missing)
	n := shards.Count()
	what := fmt.Sprintf("index %s", failed)
	if failed.Count() > 1 {
		what = fmt.Sprintf("indexes %s", failed)
		if len(failed.Intervals()) > messageRunsLimit {
			what = fmt.Sprintf("%d mapped indexes", failed.Count())
		}
	}
	msg := fmt.Sprintf("%s failed %s (%s %s) and will not run %s again", v1alpha1.TargetKey(ts.key).Describe(), what,
		plural(n, "shard", "shards"), m.Shards.Describe(shards, messageRunsLimit), plural(failed.Count(), "it", "them"))
	switch {
	case shards.Difference(c.mayCover).IsEmpty():
		return msg + "; other identities may still cover " + plural(n, "it", "them")
	case ts.obs.ChildOwner == OwnerRunning:
		// Its owner's failure policy may restart the Job (a new identity) once it fails;
		// repair makes no follow-up Job for a child.
		return msg + "; its JobSet may restart the Job once it ends"
	}
	return msg + ": repair " + plural(n, "it", "them")
}

func coverage(m *Mapping, states []*targetState) coverageState {
	var originalIvs, repairedIvs []indexset.Interval
	for _, ts := range states {
		if !ts.found && !ts.deleted {
			continue
		}
		originalIvs = append(originalIvs, m.ShardsOf(ts.key, ts.covered, false).Intervals()...)
		repairedIvs = append(repairedIvs, m.ShardsOf(ts.key, ts.covered, true).Intervals()...)
	}
	original, repaired := indexset.FromIntervals(originalIvs...), indexset.FromIntervals(repairedIvs...)
	all := indexset.Set{}
	if m.Shards.Count() > 0 {
		all = indexset.Range(0, m.Shards.Count()-1)
	}
	c := coverageState{covered: original.Union(repaired).Intersect(all)}
	c.missing = all.Difference(c.covered)
	c.byRepairOnly = repaired.Difference(original)
	var mayIvs []indexset.Interval
	for _, ts := range states {
		if run := ts.mayRun(); !run.IsEmpty() {
			mayIvs = append(mayIvs, m.ShardsOfAny(ts.key, run).Intervals()...)
		}
	}
	c.mayCover = indexset.FromIntervals(mayIvs...)
	coveredOf := make(map[string]indexset.Set, len(states))
	for _, ts := range states {
		if ts.found || ts.deleted {
			coveredOf[ts.key] = ts.covered
		}
	}
	c.byRepairOnly.Each(func(o int) bool {
		for _, r := range m.Runs {
			// The repair identity that covered the shard: a shard may have several repairs,
			// and only one whose index completed covered it.
			if r.Repair && o >= r.FirstShard && o < r.FirstShard+r.Length && coveredOf[r.Target].Contains(r.FirstIndex+o-r.FirstShard) {
				c.coveredBy = append(c.coveredBy, v1alpha1.ShardCoverage{Shard: m.Shards.Name(o), Target: r.Target, Index: int32(r.FirstIndex + o - r.FirstShard)})
				break
			}
		}
		return len(c.coveredBy) < maxCoveredBy
	})
	return c
}

// coveredAsJudged counts as covered, for an Accepted batch, the missing shards of the
// records whose completed indexes the status left out for size (coverageLost). The
// verdict found every shard covered by the identities on its record, which it follows
// alone since (recordStands), and their coverage cannot shrink: a shard missing now is
// one a lost list covered. Deleting a Job changes no verdict, the status's size neither.
func (c *coverageState) coveredAsJudged(m *Mapping, states []*targetState) {
	var lost []indexset.Interval
	for _, ts := range states {
		if ts.coverageLost {
			lost = append(lost, m.ShardsOfAny(ts.key, ts.mapped).Intervals()...)
		}
	}
	back := c.missing.Intersect(indexset.FromIntervals(lost...))
	c.covered, c.missing = c.covered.Union(back), c.missing.Difference(back)
}

// describeMissing says which identities each missing shard waits for: its original one,
// and those repair assignments gave it ("D = job j index 3", "shard-3..shard-9 = job j
// indexes 3-9", "B = job r index 0 (repair)").
func describeMissing(m *Mapping, missing indexset.Set) string {
	var parts []string
	described := 0
	// part describes the shards iv of run r: the identities of r that assign them.
	part := func(r Run, iv indexset.Interval) string {
		first := r.FirstIndex + iv.First - r.FirstShard
		last := first + iv.Last - iv.First
		who := v1alpha1.TargetKey(r.Target).Describe()
		if iv.First == iv.Last {
			return fmt.Sprintf("%s = %s index %d", m.Shards.Name(iv.First), who, first)
		}
		return fmt.Sprintf("%s = %s indexes %s", m.Shards.Describe(indexset.FromIntervals(iv), 1), who, indexset.Range(first, last))
	}
	for _, miss := range missing.Intervals() {
		if len(parts) == messageRunsLimit {
			break
		}
		// Split the missing interval along the runs (sorted by shard) that assign it.
		i, _ := slices.BinarySearchFunc(m.byShard, miss.First, func(r Run, o int) int { return cmp.Compare(r.FirstShard+r.Length-1, o) })
		for ; i < len(m.byShard) && m.byShard[i].FirstShard <= miss.Last && len(parts) < messageRunsLimit; i++ {
			r := m.byShard[i]
			iv := indexset.Interval{First: max(miss.First, r.FirstShard), Last: min(miss.Last, r.FirstShard+r.Length-1)}
			described += iv.Count()
			parts = append(parts, part(r, iv))
			// A repair gave these shards a further identity: they wait for it as well, and
			// naming only the original one would send the reader to an identity that may
			// never cover them.
			for _, rr := range m.Runs {
				if len(parts) == messageRunsLimit {
					break
				}
				if !rr.Repair || rr.FirstShard > iv.Last || rr.FirstShard+rr.Length-1 < iv.First {
					continue
				}
				riv := indexset.Interval{First: max(iv.First, rr.FirstShard), Last: min(iv.Last, rr.FirstShard+rr.Length-1)}
				parts = append(parts, part(rr, riv)+" (repair)")
			}
		}
	}
	s := strings.Join(parts, ", ")
	if more := missing.Count() - described; more > 0 {
		s += fmt.Sprintf(" (+%d more shards)", more)
	}
	return s
}

func cond(t string, ok bool, reason, msg string) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

func assignmentCondition(problems []Problem) metav1.Condition {
	if len(problems) == 0 {
		return cond(v1alpha1.ConditionAssignmentValid, true, v1alpha1.ReasonValid, "the mapping is a partition of the declared shards")
	}
	msg := problems[0].Message
	if len(problems) > 1 {
		var more []string
		for _, p := range problems[1:min(len(problems), 4)] {
			more = append(more, p.Message)
		}
		msg += "; " + strings.Join(more, "; ")
		if len(problems) > 4 {
			msg += fmt.Sprintf(" (+%d more problems)", len(problems)-4)
		}
	}
	return cond(v1alpha1.ConditionAssignmentValid, false, problems[0].Reason, msg)
}

func admittedCondition(states []*targetState) metav1.Condition {
	var pending, evicted, unqueued, notFound, deleted []string
	finished := 0
	for _, ts := range states {
		name := v1alpha1.TargetKey(ts.key).Describe()
		w := ts.obs.Workload
		if ts.deleted {
			// A record is judged by its Workload as last observed: deleting a Job that ran
			// to its end changes nothing here either.
			w = ts.record.Workload
		}
		switch {
		case ts.lostBeforeTerminal():
			deleted = append(deleted, name)
		case !ts.found && !ts.deleted && ts.obs.notServed() != "":
			// Reported per API (notServedNotes), not as a wait.
		case !ts.found && !ts.deleted && ts.onUnreadWorker() == "":
			notFound = append(notFound, name)
		case w == nil:
			unqueued = append(unqueued, name)
		case w.Evicted:
			evicted = append(evicted, fmt.Sprintf("%s (Workload %s)", name, w.Name))
		case w.Finished || ts.facts.terminal != "":
			// Kueue finishes a Workload because its Job ended; the Job says so first.
			finished++
		case !w.Admitted:
			pending = append(pending, fmt.Sprintf("%s (Workload %s)", name, w.Name))
		}
	}
	t := v1alpha1.ConditionAdmitted
	notServed := notServedNotes(states)
	switch {
	case len(notServed) > 0:
		// No wait: nothing comes of it until an admin installs the API.
		return cond(t, false, v1alpha1.ReasonAPINotServed, strings.Join(notServed, "; "))
	case len(notFound) > 0:
		return cond(t, false, v1alpha1.ReasonTargetsNotFound, "waiting for "+listNames(notFound)+" to exist")
	case len(deleted) > 0:
		return cond(t, false, v1alpha1.ReasonTargetDeleted, listNames(deleted)+" deleted before terminating: can no longer be admitted")
	case len(evicted) > 0:
		return cond(t, false, v1alpha1.ReasonEvicted, "evicted by Kueue: "+listNames(evicted)+"; completed indexes are kept")
	case len(pending) > 0:
		return cond(t, false, v1alpha1.ReasonPending, "not admitted by Kueue yet: "+listNames(pending))
	case len(unqueued) > 0:
		c := cond(t, false, v1alpha1.ReasonNoWorkload, "no Kueue Workload found for "+listNames(unqueued))
		c.Status = metav1.ConditionUnknown
		return c
	case finished == len(states):
		return cond(t, true, v1alpha1.ReasonFinished, "every target's Job ran to its end under its Kueue admission")
	}
	return cond(t, true, v1alpha1.ReasonAdmitted, "every target's Workload is admitted")
}

func coveredCondition(m *Mapping, states []*targetState, cov coverageState, valid bool) metav1.Condition {
	t := v1alpha1.ConditionShardsCovered
	total := m.Shards.Count()
	head := fmt.Sprintf("%d/%d shards covered", cov.covered.Count(), total)
	if !valid {
		return cond(t, false, v1alpha1.ReasonAssignmentInvalid,
			head+" by index only; the mapping is invalid (see AssignmentValid), so completed indexes prove nothing about the shards")
	}
	var deleted []string
	for _, ts := range states {
		if ts.deleted {
			deleted = append(deleted, v1alpha1.TargetKey(ts.key).Describe())
		}
	}
	if cov.missing.IsEmpty() {
		msg := head
		if !cov.byRepairOnly.IsEmpty() {
			msg += fmt.Sprintf("; %s covered by repair assignments", m.Shards.Describe(cov.byRepairOnly, 8))
		}
		if len(deleted) > 0 {
			msg += "; " + listNames(deleted) + " deleted, " + plural(len(deleted), "its", "their") + " record stands"
		}
		return cond(t, true, v1alpha1.ReasonAllShardsCovered, msg)
	}
	msg := head + "; missing " + describeMissing(m, cov.missing)
	var notes []string
	var notFound, neverObserved []string
	notServed := false
	for _, ts := range states {
		name := v1alpha1.TargetKey(ts.key).Describe()
		var failed string
		if ts.found && ts.facts.terminal == "" {
			failed = cov.failedNote(m, ts)
		}
		switch {
		case !ts.found && !ts.deleted && ts.obs.notServed() != "":
			notServed = true
		case ts.deleted && ts.coverageLost:
			notes = append(notes, name+" deleted; its completed indexes were left out of the status for size, so its coverage is lost")
		case ts.neverCreated() && cov.awaitsRepair(m, ts):
			notes = append(notes, name+" was never created and will not be"+ts.endedBy()+"; other identities may still cover its missing shards")
		case ts.neverCreated():
			notes = append(notes, name+" was never created and will not be"+ts.endedBy()+"; repair its missing shards")
		case cov.awaitsRepair(m, ts):
			notes = append(notes, name+" deleted before it terminated"+ts.endedBy()+": it can no longer complete; other identities may still cover its missing shards")
		case ts.lostBeforeTerminal():
			notes = append(notes, name+" deleted before it terminated"+ts.endedBy()+": it can no longer complete; repair its missing shards")
		case ts.deleted:
			notes = append(notes, fmt.Sprintf("%s deleted after it recorded %s, its record stands", name, ts.facts.terminal))
		case ts.onUnreadWorker() != "":
			notes = append(notes, ts.onUnreadWorker())
		case !ts.found:
			notFound = append(notFound, name)
			if !ts.everObserved {
				neverObserved = append(neverObserved, name)
			}
		case failed != "":
			notes = append(notes, failed)
		case ts.facts.terminal == TerminalComplete && ts.facts.successPolicy != "" &&
			!m.ShardsOfAny(ts.key, ts.mapped).Intersect(cov.missing).IsEmpty():
			notes = append(notes, fmt.Sprintf("%s succeeded by its successPolicy (%s) with shards not covered", name, ts.facts.successPolicy))
		case ts.facts.terminal == "" && ts.facts.criteriaMet && ts.facts.successPolicy != "" &&
			!m.ShardsOfAny(ts.key, ts.mapped).Intersect(cov.missing).IsEmpty():
			// The Job controller terminates the Job's other pods once its criterion is met,
			// before it records Complete: the missing shards will not run in it (mayRun).
			notes = append(notes, fmt.Sprintf("%s met its successPolicy (%s) with shards not covered", name, ts.facts.successPolicy))
		case ts.awaitsOwner() && ts.facts.terminal == TerminalFailed:
			notes = append(notes, fmt.Sprintf("%s failed (%s), its JobSet may restart it", name, ts.facts.reason))
		case ts.facts.terminal == TerminalFailed:
			notes = append(notes, fmt.Sprintf("%s failed (%s)", name, ts.facts.reason))
		}
	}
	if len(notFound) > 0 {
		notes = append(notes, listNames(notFound)+" not found")
	}
	if notServed {
		notes = append(notServedNotes(states), notes...)
	}
	notes = boundList(notes)
	if len(notes) > 0 {
		msg += "; " + strings.Join(notes, "; ")
	}
	reason := v1alpha1.ReasonShardsMissing
	if len(states) > 0 && allNotFound(states) {
		reason = v1alpha1.ReasonTargetsNotFound
		if notServed {
			reason = v1alpha1.ReasonAPINotServed
		} else if len(neverObserved) == len(states) {
			// Never a false acceptance, and never a silent wait either: an account created
			// after its Jobs finished and were deleted can count nothing of them.
			msg += "; this account has never observed " + plural(len(states), "it", "them") +
				": if a Job already ran and was deleted before the account existed, its completions cannot be counted; re-run its shards in a Job the assignments name"
		}
	}
	return cond(t, false, reason, msg)
}

// notServedNotes say which targets cannot exist because the cluster does not serve their
// kind's API, one note per API: "jobset a replicatedJob w index 0, ... cannot exist:
// jobset.x-k8s.io/v1alpha2 JobSet is not served by this cluster: install it, ...".
func notServedNotes(states []*targetState) []string {
	var whys []string
	names := map[string][]string{}
	for _, ts := range states {
		why := ts.obs.notServed()
		if why == "" || ts.deleted {
			continue
		}
		if names[why] == nil {
			whys = append(whys, why)
		}
		names[why] = append(names[why], v1alpha1.TargetKey(ts.key).Describe())
	}
	out := make([]string, 0, len(whys))
	for _, why := range whys {
		out = append(out, listNames(names[why])+" cannot exist: "+why)
	}
	return out
}

func allNotFound(states []*targetState) bool {
	for _, ts := range states {
		if ts.found || ts.deleted || ts.neverCreated() || ts.onUnreadWorker() != "" {
			return false
		}
	}
	return true
}

func terminatedCondition(m *Mapping, states []*targetState, cov coverageState) metav1.Condition {
	t := v1alpha1.ConditionTerminated
	var waiting, failed, lost, lostCovered []string
	for _, ts := range states {
		name := v1alpha1.TargetKey(ts.key).Describe()
		switch {
		case cov.awaitsRepair(m, ts):
			// It will never terminate, but every shard it left missing has a repair that may
			// still cover it: the batch waits for those.
			waiting = append(waiting, name+" (deleted before it terminated; other identities may still cover its missing shards)")
		case ts.lostBeforeTerminal():
			// It will never terminate. Once repairs covered its shards it stands like a
			// failed Job; until then the batch cannot complete through it.
			if m.ShardsOfAny(ts.key, ts.mapped).Intersect(cov.missing).IsEmpty() {
				lostCovered = append(lostCovered, name+" deleted before it terminated")
			} else {
				lost = append(lost, name)
			}
		case ts.onUnreadWorker() != "":
			waiting = append(waiting, ts.onUnreadWorker())
		case !ts.found && !ts.deleted:
			waiting = append(waiting, name+" (not found)")
		case ts.awaitsOwner() && ts.facts.terminal == TerminalFailed:
			waiting = append(waiting, fmt.Sprintf("%s Failed (%s), its JobSet may restart it", name, ts.facts.reason))
		case ts.awaitsOwner():
			waiting = append(waiting, name+" Complete, but its JobSet has not ended and may still restart it")
		case ts.facts.terminal == TerminalFailed:
			failed = append(failed, fmt.Sprintf("%s Failed (%s)", name, ts.facts.reason))
		case ts.facts.terminal == "":
			w := name
			if ts.facts.criteriaMet {
				w += " (SuccessCriteriaMet, Complete not yet recorded)"
			} else if ts.facts.failureTarget {
				w += " (FailureTarget, Failed not yet recorded)"
			}
			waiting = append(waiting, w)
		}
	}
	switch {
	case len(lost) > 0:
		msg := listNames(lost) + " deleted before " + plural(len(lost), "it", "they") + " terminated: can no longer complete; repair " + plural(len(lost), "its", "their") + " missing shards"
		if len(waiting) > 0 {
			msg += notTerminatedMark + listNames(waiting)
		}
		return cond(t, false, v1alpha1.ReasonTargetDeleted, msg)
	case len(waiting) > 0:
		return cond(t, false, v1alpha1.ReasonAwaitingTermination, "not terminated: "+listNames(waiting)+"; coverage does not imply termination")
	case len(lostCovered) > 0:
		return cond(t, true, v1alpha1.ReasonTargetDeleted, listNames(append(lostCovered, failed...)))
	case len(failed) > 0:
		return cond(t, true, v1alpha1.ReasonTargetFailed, listNames(failed))
	}
	return cond(t, true, v1alpha1.ReasonComplete, "every target's Job recorded Complete")
}

func resultsCondition(m *Mapping, spec *v1alpha1.BatchAccountSpec, res resultsState, cov coverageState, states []*targetState) metav1.Condition {
	t := v1alpha1.ConditionResultsAccepted
	if !spec.RequiresResults() {
		return cond(t, true, v1alpha1.ReasonResultsNotRequired, "the account requires no shard results (spec.acceptance.requireResults is false)")
	}
	if res.unreadable != "" {
		// A verdict of this generation, or of one that judged as it does (a changed
		// ttlSecondsAfterFinished), on the identities the targets still have stands:
		// every shard it declares had an accepted result. Of another spec (new shards, a
		// repair) or another identity (a restart's), nothing is known.
		p := res.previous
		if p != nil && p.Status == metav1.ConditionTrue && (p.ObservedGeneration == res.generation || res.sameSpec) && res.judgedOn {
			return cond(t, true, p.Reason, p.Message)
		}
		msg := "results can be neither recorded nor read: " + res.unreadable + "; their pods stay held, at most the maximum hold"
		if p != nil && p.Status == metav1.ConditionTrue && !res.judgedOn {
			msg += "; the results accepted before are of identities since replaced, whose successors' results are not judged yet"
		}
		return cond(t, false, v1alpha1.ReasonResultsPending, msg)
	}
	if res.ruleError != "" {
		return cond(t, false, v1alpha1.ReasonRuleInvalid, "the acceptance rule does not compile in this controller: "+res.ruleError+
			"; results are kept but not judged, and their pods stay held: fix spec.acceptance.rule and they are judged")
	}
	total := m.Shards.Count()
	head := fmt.Sprintf("%d/%d shard results accepted", res.accepted.Count(), total)
	if res.accepted.Count() == total {
		return cond(t, true, v1alpha1.ReasonAllResultsAccepted, head)
	}
	lost := ""
	if !res.missing.IsEmpty() {
		lost = fmt.Sprintf("no result can arrive for %s (MissingResult: the identity completed and terminated or was deleted, no result was recorded and no pod is left that can report one): re-run %s with a repair",
			m.Shards.Describe(res.missing, 8), plural(res.missing.Count(), "it", "them"))
	}
	pending := indexset.Range(0, total-1).Difference(res.accepted)
	if len(res.pendingRejections) > 0 {
		msg := head + "; rejected: " + strings.Join(res.pendingRejections, "; ")
		if lost != "" {
			msg += "; " + lost
		}
		msg += uncompletedNote(res)
		return cond(t, false, v1alpha1.ReasonResultRejected, msg)
	}
	if lost != "" {
		msg := head + "; " + lost + workerProblems(states, "on")
		if rest := pending.Difference(res.missing); !rest.IsEmpty() {
			msg += "; waiting for " + m.Shards.Describe(rest, 8) + awaited(res)
		}
		return cond(t, false, v1alpha1.ReasonMissingResult, msg+uncompletedNote(res))
	}
	return cond(t, false, v1alpha1.ReasonResultsPending, head+"; waiting for "+m.Shards.Describe(pending, 8)+elsewhere(states)+awaited(res)+uncompletedNote(res))
}

// uncompletedNote names the results that do not count because their identity has not
// completed the index ("" for none): the reader sees a result and should know why its
// shard still waits.
func uncompletedNote(res resultsState) string {
	if len(res.uncompleted) == 0 {
		return ""
	}
	return "; not counted, its identity did not complete the index: " + strings.Join(res.uncompleted, "; ")
}

// awaited says which rejections a result still to come may make good ("" for none): a
// repair's, or a held pod's judged again under the spec's rule. The rejection is no
// verdict yet, but the reader should know of it.
func awaited(res resultsState) string {
	if len(res.awaitingRejections) == 0 {
		return ""
	}
	return "; rejected, awaiting a result that may still come: " + strings.Join(res.awaitingRejections, "; ")
}

// elsewhere says which targets MultiKueue runs in worker clusters, whose pods (and so
// results) are not on this cluster: where their results are read from, why they cannot
// be read now, or that batchledger reads none from there; "" when none runs elsewhere.
func elsewhere(states []*targetState) string {
	var names, read []string
	for _, ts := range states {
		w := ts.obs.Workload
		if w == nil || w.Cluster == "" && len(w.NominatedClusters) == 0 {
			continue
		}
		where := "MultiKueue worker cluster " + w.Cluster
		if w.Cluster == "" {
			where = "MultiKueue worker clusters " + strings.Join(w.NominatedClusters, ", ")
		}
		switch {
		case ts.obs.ResultsOnWorker && ts.obs.WorkerProblem != "":
			continue // workerProblems
		case ts.obs.ResultsOnWorker:
			read = append(read, v1alpha1.TargetKey(ts.key).Describe()+" in "+where)
		default:
			names = append(names, v1alpha1.TargetKey(ts.key).Describe()+" in "+where)
		}
	}
	out := workerProblems(states, "pending on")
	if len(read) > 0 {
		out += "; " + listNames(read) + ": its results are read from the worker as batchledger records them there"
	}
	if len(names) > 0 {
		out += "; " + listNames(names) + ": its pods are not on this cluster, and batchledger records no result from a worker cluster"
	}
	return out
}

// workerProblems says, for each target whose results its worker cluster's records would
// give, why they cannot be read there ("; results of job j <relation> worker-a: ...", or
// "; results of job j: ..." when no worker is known); "" when there is no such problem.
func workerProblems(states []*targetState, relation string) string {
	var out string
	for _, ts := range states {
		if !ts.obs.ResultsOnWorker || ts.obs.WorkerProblem == "" {
			continue
		}
		where := ""
		if w := ts.obs.Workload; w != nil && w.Cluster != "" {
			where = " " + relation + " " + w.Cluster
		}
		out += "; results of " + v1alpha1.TargetKey(ts.key).Describe() + where + ": " + ts.obs.WorkerProblem
	}
	return out
}

// acceptedCondition is the batch verdict, explained by the first unmet observation.
// repaired is whether repair assignments covered shards the original ones did not.
func acceptedCondition(conds []metav1.Condition, spec *v1alpha1.BatchAccountSpec, repaired bool) metav1.Condition {
	by := map[string]metav1.Condition{}
	for _, c := range conds {
		by[c.Type] = c
	}
	t := v1alpha1.ConditionAccepted
	if c := by[v1alpha1.ConditionAssignmentValid]; c.Status != metav1.ConditionTrue {
		return cond(t, false, v1alpha1.ReasonAssignmentInvalid, c.Message)
	}
	if c := by[v1alpha1.ConditionTerminated]; c.Status != metav1.ConditionTrue && c.Reason == v1alpha1.ReasonTargetDeleted {
		// A target that can never complete comes first: waiting would be a dead end. Its
		// shards are not all covered (else it would stand like a failed Job), and the
		// coverage message names them and the deletion.
		return cond(t, false, v1alpha1.ReasonTargetDeleted, by[v1alpha1.ConditionShardsCovered].Message)
	}
	if c := by[v1alpha1.ConditionShardsCovered]; c.Status != metav1.ConditionTrue {
		return cond(t, false, c.Reason, c.Message)
	}
	if c := by[v1alpha1.ConditionTerminated]; c.Status != metav1.ConditionTrue {
		return cond(t, false, v1alpha1.ReasonAwaitingTermination, c.Message)
	}
	if c := by[v1alpha1.ConditionResultsAccepted]; c.Status != metav1.ConditionTrue {
		return cond(t, false, c.Reason, c.Message)
	}
	msg := "every shard covered, every target terminated"
	if c := by[v1alpha1.ConditionTerminated]; c.Reason == v1alpha1.ReasonTargetFailed || c.Reason == v1alpha1.ReasonTargetDeleted {
		msg += " (" + c.Message
		if repaired {
			msg += ", its shards covered by repair"
		}
		msg += ")"
	} else {
		msg += " Complete"
	}
	if spec.RequiresResults() {
		msg += ", every shard result accepted"
	}
	return cond(t, true, v1alpha1.ReasonAccepted, msg)
}
