package repair

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/indexset"
)

// maxRepairs is spec.repairs' MaxItems.
const maxRepairs = 1024

// Input is what repair planning reads.
type Input struct {
	// Account is the account to repair, with its status.
	Account *v1alpha1.BatchAccount
	// Jobs are the Jobs of the account's namespace by name: the originals whose pod
	// templates repair Jobs copy, and the names a repair Job must not take.
	Jobs map[string]*batchv1.Job
	// QueuedTemplates are, by Job name, the pod templates Kueue recorded in the Job's
	// Workload (spec.podSets[0].template) before admission injected the flavor's node
	// selectors and tolerations; a repair Job starts from these, as Kueue restores a Job
	// it suspends, so that it is queued afresh rather than pinned to the old flavor.
	QueuedTemplates map[string]*corev1.PodTemplateSpec
}

// Plan is what repair creates: one follow-up Job per original Job with missing
// shards, each with the entry of spec.repairs joining it to the account.
type Plan struct {
	// Account and Namespace name the account repaired.
	Account   string
	Namespace string
	// Repairs are the follow-up Jobs, in the order of their first missing shard.
	Repairs []PlannedJob
	// Waiting says which missing shards were left out because an identity assigned to
	// them may still complete (re-running them would duplicate work in flight).
	Waiting string
}

// PlannedJob is one follow-up Job and its assignment.
type PlannedJob struct {
	// Original is the Job whose identities can no longer complete.
	Original string
	// Shards names the repaired shards compactly, in repair-index order.
	Shards string
	// Count is the number of repaired shards: the repair Job's completions.
	Count int
	// Why says what became of the original identities.
	Why string
	// Queued is whether the Job goes through a Kueue LocalQueue (Kueue unsuspends it).
	Queued bool
	// Job is the repair Job to create (suspended).
	Job *batchv1.Job
	// Assignment is the entry to append to the account's spec.repairs (a repair
	// assignment; in spec.repairs its repair field is implied, so it is left unset).
	Assignment v1alpha1.Assignment
}

// repairGroup collects the repairable missing shards of one original Job.
type repairGroup struct {
	// target is the original Job's target key, job its name.
	target   string
	job      string
	ordinals []int
	indexes  []int
	states   []string
}

// NewPlan plans the repair of an account's missing shards, without side effects: for
// every missing shard whose identities can no longer complete (their Job terminated or
// was deleted, or the index failed), and, when the account requires results, every
// covered shard whose result can no longer arrive (MissingResult) or was rejected, one
// follow-up Indexed Job per original Job, running a copy of its pod template over as
// many indexes as that Job has shards to re-run, and a repair assignment mapping the new
// Job's indexes 0..k-1 onto those shards in order.
//
// The pod template is the original Job's; when the original was deleted, that of an
// earlier repair Job of it (annotation batchledger.dev/repair-of).
//
// It refuses, with a message naming the account: an account whose status is missing,
// stale or reports an invalid mapping; an account with nothing to re-run or nothing that
// can no longer complete; shards assigned to JobSet children (the JobSet re-runs those
// itself) or TrainJob nodes (the TrainJob is re-submitted); an original Job that was recreated; and one that was deleted with no repair
// Job of it left to copy a template from.
func NewPlan(in Input) (*Plan, error) {
	ba := in.Account
	who := fmt.Sprintf("BatchAccount %q in namespace %q", ba.Name, ba.Namespace)
	valid := meta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAssignmentValid)
	switch {
	case valid == nil:
		return nil, fmt.Errorf("%s has no status yet: wait for the batchledger controller to observe it", who)
	case ba.Status.ObservedGeneration != ba.Generation:
		// Before AssignmentValid: an older generation's verdict on the mapping says
		// nothing of the spec as it is now (a mapping fixed since).
		return nil, fmt.Errorf("%s: the status describes spec generation %d but the spec is at generation %d; wait for the controller to observe it",
			who, ba.Status.ObservedGeneration, ba.Generation)
	case valid.Status != metav1.ConditionTrue:
		return nil, fmt.Errorf("%s: AssignmentValid is %s (%s): %s; repair needs a valid mapping", who, valid.Status, valid.Reason, valid.Message)
	}
	const whole = "repair needs the whole list: split the batch into smaller accounts, or repair from the Jobs' own status"
	if ba.Status.Shards.MissingOrdinalsTruncated {
		return nil, fmt.Errorf("%s: %d shards are missing, more than the status can list (it names only the lowest); "+whole,
			who, ba.Status.Shards.Total-ba.Status.Shards.Covered)
	}
	if ba.Status.Results.OrdinalsTruncated {
		return nil, fmt.Errorf("%s: more shards lack an acceptable result than the status can list (it names only the lowest); "+whole, who)
	}
	missing, err := indexset.Parse(ba.Status.Shards.MissingOrdinals)
	if err != nil {
		return nil, fmt.Errorf("%s: status.shards.missingOrdinals: %w", who, err)
	}
	// Covered shards whose result can no longer come from the identity that covered them.
	var lostResults, rejectedResults indexset.Set
	if a := ba.Spec.Acceptance; a != nil && a.RequireResults {
		if lostResults, err = indexset.Parse(ba.Status.Results.MissingOrdinals); err != nil {
			return nil, fmt.Errorf("%s: status.results.missingOrdinals: %w", who, err)
		}
		if rejectedResults, err = indexset.Parse(ba.Status.Results.RejectedOrdinals); err != nil {
			return nil, fmt.Errorf("%s: status.results.rejectedOrdinals: %w", who, err)
		}
		lostResults, rejectedResults = lostResults.Difference(missing), rejectedResults.Difference(missing).Difference(lostResults)
	}
	rerun := missing.Union(lostResults).Union(rejectedResults)
	if rerun.IsEmpty() {
		msg := fmt.Sprintf("%s: nothing to repair: all %d shards are covered", who, ba.Status.Shards.Total)
		if a := ba.Spec.Acceptance; a != nil && a.RequireResults {
			// A shard whose result was rejected while an identity may still report one is
			// pending, not in rejectedOrdinals: say so rather than that nothing was rejected.
			if c := meta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionResultsAccepted); c != nil && c.Status != metav1.ConditionTrue {
				return nil, fmt.Errorf("%s: nothing to repair now: all %d shards are covered and no result is lost yet; ResultsAccepted is %s: %s",
					who, ba.Status.Shards.Total, c.Reason, c.Message)
			}
			msg += " and no result is missing or rejected"
		}
		return nil, errors.New(msg)
	}
	m := account.Compile(ba.Namespace, &ba.Spec)
	targets := explanation.NewObservedTargets(&ba.Status)

	var groups []*repairGroup
	byTarget := map[string]*repairGroup{}
	var waiting, onChildren []explanation.MissingShard
	var childKinds []string
	var planErr error
	rerun.Each(func(o int) bool {
		ids := explanation.WaitsFor(m, targets, o)
		if len(ids) == 0 || ids[0].Repair {
			planErr = fmt.Errorf("%s: shard %s has no original identity in the mapping", who, m.Shards.Name(o))
			return false
		}
		ms := explanation.MissingShard{Shard: m.Shards.Name(o), Ordinal: o, WaitsFor: ids}
		switch {
		case lostResults.Contains(o):
			// The account judged it: covered, and its result can no longer arrive.
			ids[0].State = "completed, but no result can arrive (MissingResult)"
		case rejectedResults.Contains(o):
			ids[0].State = "completed, its result rejected"
		case slices.ContainsFunc(ids, func(id explanation.Identity) bool { return !id.Final }):
			waiting = append(waiting, ms)
			return true
		}
		orig := ids[0]
		ref, _ := v1alpha1.ParseTargetKey(orig.Target)
		if ref.IsChild() {
			onChildren = append(onChildren, ms)
			if k := ref.Kind(); !slices.Contains(childKinds, k) {
				childKinds = append(childKinds, k)
			}
			return true
		}
		g := byTarget[orig.Target]
		if g == nil {
			g = &repairGroup{target: orig.Target, job: ref.Job}
			byTarget[orig.Target] = g
			groups = append(groups, g)
		}
		g.ordinals = append(g.ordinals, o)
		g.indexes = append(g.indexes, orig.Index)
		if !slices.Contains(g.states, orig.State) {
			g.states = append(g.states, orig.State)
		}
		return true
	})
	if planErr != nil {
		return nil, planErr
	}
	if len(onChildren) > 0 {
		// While the controller awaits a child's owner it may restart the child; an owner
		// that ended recreates none (the status names the awaited ones only in words, so
		// this holds for all, as in explain and watch).
		ownersRun := account.AwaitsTermination(&ba.Status)
		names := make([]string, len(childKinds))
		for i, k := range childKinds {
			names[i] = explanation.OwnerName(k)
		}
		msg := fmt.Sprintf("%s: %s assigned to %s children (%s): repair creates follow-up Jobs for plain Job targets only; %s",
			who, explanation.ShardNames(onChildren), strings.Join(names, " and "), explanation.Identities(onChildren, true), explanation.OwnerRemedy(childKinds, !ownersRun))
		if len(groups) > 0 {
			// The plan is refused whole: say so, or the shards of plain Jobs look repaired.
			var held []int
			for _, g := range groups {
				held = append(held, g.ordinals...)
			}
			slices.Sort(held)
			msg += fmt.Sprintf("; nothing was created, for %s %s of plain Jobs neither: run repair again once no child's shard is left to re-run",
				output.Plural(len(held), "shard", "shards"), m.Shards.Describe(indexset.Of(held...), 8))
		}
		return nil, errors.New(msg)
	}
	plan := &Plan{Account: ba.Name, Namespace: ba.Namespace}
	if len(waiting) > 0 {
		plan.Waiting = fmt.Sprintf("%s still %s for %s", explanation.ShardNames(waiting), output.Plural(len(waiting), "waits", "wait"), explanation.Identities(waiting, false))
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s: nothing to repair now: %s to complete; repair re-runs only shards whose identities can no longer complete", who, plan.Waiting)
	}
	if n := len(ba.Spec.Repairs) + len(groups); n > maxRepairs {
		return nil, fmt.Errorf("%s: %d repair assignments would make %d entries of spec.repairs, more than the %d an account holds", who, len(groups), n, maxRepairs)
	}

	taken := map[string]bool{}
	for name := range in.Jobs {
		taken[name] = true
	}
	for _, a := range ba.Spec.AllAssignments() {
		taken[a.Target.Job] = true
	}
	spec := ba.Spec.DeepCopy()
	for _, g := range groups {
		origName := g.job
		orig := in.Jobs[origName]
		shards := m.Shards.Describe(indexset.Of(g.ordinals...), 8)
		ts := targets.Status(g.target)
		switch {
		case orig == nil && ts != nil && ts.Deleted:
			// The original's record stands but its pod template went with it: an earlier
			// repair Job of it carries a copy.
			if orig = templateSource(in.Jobs, origName); orig == nil {
				return nil, fmt.Errorf("%s: Job %q was deleted and its pod template with it (shards %s were assigned to it), and no repair Job of it is left to copy one from: "+
					"create a suspended Indexed Job of %d %s from its manifest under a new name, then append to spec.repairs "+
					"{target: {job: <new name>}, indexes: %q, %s}",
					who, origName, shards, len(g.ordinals), output.Plural(len(g.ordinals), "index", "indexes"), indexset.Range(0, len(g.ordinals)-1).String(), shardsField(ba, m, g.ordinals))
			}
		case orig == nil:
			return nil, fmt.Errorf("%s: Job %q not found in namespace %q: a repair Job copies its pod template (shards %s were assigned to it)", who, origName, ba.Namespace, shards)
		case ts == nil || ts.UID != orig.UID:
			return nil, fmt.Errorf("%s: Job %q (uid %s) is not the identity the account observed; wait for the controller to observe it", who, origName, orig.UID)
		}
		name, err := freeRepairName(origName, taken)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", who, err)
		}
		taken[name] = true
		r := PlannedJob{
			Original: origName, Shards: shards, Count: len(g.ordinals),
			Why:    fmt.Sprintf("job %s %s %s: %s", origName, output.Plural(len(g.indexes), "index", "indexes"), describeList(g.indexes), strings.Join(g.states, "; ")),
			Queued: orig.Labels[QueueLabel] != "",
			Job:    repairJob(ba.Name, origName, orig, in.QueuedTemplates[orig.Name], name, g.indexes, shardNamesOf(m, g.ordinals), shards),
			Assignment: v1alpha1.Assignment{
				Target: v1alpha1.TargetRef{Job: name}, Indexes: indexset.Range(0, len(g.ordinals)-1).String(),
			},
		}
		if len(ba.Spec.Shards.Names) > 0 {
			r.Assignment.Shards = shardNamesOf(m, g.ordinals)
		} else {
			r.Assignment.ShardOrdinals = indexset.Of(g.ordinals...).String()
		}
		spec.Repairs = append(spec.Repairs, r.Assignment)
		plan.Repairs = append(plan.Repairs, r)
	}
	// The webhook and the account judge the appended mapping; refuse here rather than
	// create Jobs for an assignment that would be rejected.
	if problems := account.Compile(ba.Namespace, spec).Problems; len(problems) > 0 {
		return nil, fmt.Errorf("%s: the repair assignments would make the mapping invalid: %s: %s", who, problems[0].Reason, problems[0].Message)
	}
	return plan, nil
}

// shardsField writes the shards of a repair assignment as the spec takes them.
func shardsField(ba *v1alpha1.BatchAccount, m *account.Mapping, ordinals []int) string {
	if len(ba.Spec.Shards.Names) > 0 {
		return fmt.Sprintf("shards: [%s]", strings.Join(shardNamesOf(m, ordinals), ", "))
	}
	return fmt.Sprintf("shardOrdinals: %q", indexset.Of(ordinals...).String())
}
