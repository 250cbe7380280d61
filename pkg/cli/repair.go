package cli

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/worker"
)

// Labels a repair Job keeps from its original so that Kueue queues it the same way.
const (
	// QueueLabel names the Kueue LocalQueue a Job is submitted to.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// PriorityClassLabel names the Kueue WorkloadPriorityClass of a Job.
	PriorityClassLabel = "kueue.x-k8s.io/priority-class"
)

// Environment of a repair Job's containers. The pod template is the original's, whose
// worker maps its completion index onto its shard; in a repair Job index k stands for
// another original index, and these variables say which. A container that declares its
// shards the way pkg/worker reads them (BATCH_SHARDS, or BATCH_SHARD_PREFIX for compact
// populations) gets BATCH_SHARDS rewritten to the repaired shards in index order, so that
// such a worker processes the right shard without knowing about repairs.
const (
	// EnvRepairOf is the original Job's name.
	EnvRepairOf = "BATCHLEDGER_REPAIR_OF"
	// EnvOriginalIndexes lists the original completion index of each repair index, in
	// order: the k-th entry is what index k replaces. Ascending lists use the Job
	// controller's interval format ("3", "3-5,9").
	EnvOriginalIndexes = "BATCHLEDGER_ORIGINAL_INDEXES"
)

// generatedPodLabels are set on a Job's pod template by the Job controller (selector
// and identity of the original Job); a repair Job gets its own.
var generatedPodLabels = []string{
	batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name", batchv1.JobCompletionIndexAnnotation,
}

// maxRepairs is spec.repairs' MaxItems.
const maxRepairs = 1024

// RepairInput is what repair planning reads.
type RepairInput struct {
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

// RepairPlan is what repair creates: one follow-up Job per original Job with missing
// shards, each with the entry of spec.repairs joining it to the account.
type RepairPlan struct {
	// Account and Namespace name the account repaired.
	Account   string
	Namespace string
	// Repairs are the follow-up Jobs, in the order of their first missing shard.
	Repairs []PlannedRepair
	// Waiting says which missing shards were left out because an identity assigned to
	// them may still complete (re-running them would duplicate work in flight).
	Waiting string
}

// PlannedRepair is one follow-up Job and its assignment.
type PlannedRepair struct {
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

// PlanRepair plans the repair of an account's missing shards, without side effects: for
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
// itself); an original Job that was recreated; and one that was deleted with no repair
// Job of it left to copy a template from.
func PlanRepair(in RepairInput) (*RepairPlan, error) {
	ba := in.Account
	who := fmt.Sprintf("BatchAccount %q in namespace %q", ba.Name, ba.Namespace)
	valid := meta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAssignmentValid)
	switch {
	case valid == nil:
		return nil, fmt.Errorf("%s has no status yet: wait for the batchledger controller to observe it", who)
	case valid.Status != metav1.ConditionTrue:
		return nil, fmt.Errorf("%s: AssignmentValid is %s (%s): %s; repair needs a valid mapping", who, valid.Status, valid.Reason, valid.Message)
	case ba.Status.ObservedGeneration != ba.Generation:
		return nil, fmt.Errorf("%s: the status describes spec generation %d but the spec is at generation %d; wait for the controller to observe it",
			who, ba.Status.ObservedGeneration, ba.Generation)
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
			msg += " and no result is missing or rejected"
		}
		return nil, errors.New(msg)
	}
	m := account.Compile(ba.Namespace, &ba.Spec)
	targets := explanation.NewObservedTargets(&ba.Status)

	var groups []*repairGroup
	byTarget := map[string]*repairGroup{}
	var waiting, onJobSets []explanation.MissingShard
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
		if ref.Job == "" {
			onJobSets = append(onJobSets, ms)
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
	if len(onJobSets) > 0 {
		return nil, fmt.Errorf("%s: %s assigned to JobSet children (%s): repair creates follow-up Jobs for plain Job targets only; a JobSet re-runs its children itself (restart), or append a repair assignment to spec.repairs by hand",
			who, explanation.ShardNames(onJobSets), explanation.Identities(onJobSets, true))
	}
	plan := &RepairPlan{Account: ba.Name, Namespace: ba.Namespace}
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
		r := PlannedRepair{
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

// templateSource is a repair Job of the deleted Job original, the newest by name, whose
// pod template is a copy of the original's.
func templateSource(jobs map[string]*batchv1.Job, original string) *batchv1.Job {
	var best *batchv1.Job
	for _, j := range jobs {
		if j.Annotations[v1alpha1.AnnotationRepairOf] == original && (best == nil || j.Name > best.Name) {
			best = j
		}
	}
	return best
}

// shardsField writes the shards of a repair assignment as the spec takes them.
func shardsField(ba *v1alpha1.BatchAccount, m *account.Mapping, ordinals []int) string {
	if len(ba.Spec.Shards.Names) > 0 {
		return fmt.Sprintf("shards: [%s]", strings.Join(shardNamesOf(m, ordinals), ", "))
	}
	return fmt.Sprintf("shardOrdinals: %q", indexset.Of(ordinals...).String())
}

// freeRepairName is "<job>-repair-<n>" with the first n no Job and no assignment uses: a
// name an assignment still names (its Job deleted) would join the new Job to the old
// identity's entry.
func freeRepairName(job string, taken map[string]bool) (string, error) {
	for n := 1; ; n++ {
		name := fmt.Sprintf("%s-repair-%d", job, n)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return "", fmt.Errorf("cannot name a repair Job of Job %q: %q is not a valid Job name (%s)", job, name, strings.Join(errs, "; "))
		}
		if !taken[name] {
			return name, nil
		}
	}
}

func shardNamesOf(m *account.Mapping, ordinals []int) []string {
	names := make([]string, len(ordinals))
	for i, o := range ordinals {
		names[i] = m.Shards.Name(o)
	}
	return names
}

// describeList writes indexes in the interval format when ascending, else as a list.
func describeList(indexes []int) string {
	if slices.IsSorted(indexes) {
		return indexset.Of(indexes...).String()
	}
	s := make([]string, len(indexes))
	for i, x := range indexes {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// repairJob builds the follow-up Job: the original's pod template (as queued, without the
// Job controller's generated labels) over len(indexes) indexes, its failure handling,
// its Kueue queue and priority, created suspended.
//
// origName is the Job whose identities are repaired; orig is the Job whose template is
// copied: origName itself, or an earlier repair Job of it when it was deleted.
func repairJob(accountName, origName string, orig *batchv1.Job, queued *corev1.PodTemplateSpec, name string, indexes []int, shardNames []string, shards string) *batchv1.Job {
	tmpl := orig.Spec.Template.DeepCopy()
	if queued != nil {
		// What Kueue restores when it suspends a Job: the fields admission injects.
		tmpl.Labels = maps.Clone(queued.Labels)
		tmpl.Annotations = maps.Clone(queued.Annotations)
		tmpl.Spec.NodeSelector = maps.Clone(queued.Spec.NodeSelector)
		tmpl.Spec.Tolerations = slices.Clone(queued.Spec.Tolerations)
		tmpl.Spec.SchedulingGates = slices.Clone(queued.Spec.SchedulingGates)
	}
	for _, l := range generatedPodLabels {
		delete(tmpl.Labels, l)
		delete(tmpl.Annotations, l)
	}
	if len(tmpl.Labels) == 0 {
		tmpl.Labels = nil
	}
	if len(tmpl.Annotations) == 0 {
		tmpl.Annotations = nil
	}
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		declaresShards := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == worker.EnvShards || e.Name == worker.EnvShardPrefix })
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == EnvRepairOf || e.Name == EnvOriginalIndexes || (declaresShards && e.Name == worker.EnvShards)
		})
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvRepairOf, Value: origName}, corev1.EnvVar{Name: EnvOriginalIndexes, Value: describeList(indexes)})
		if declaresShards {
			// An explicit list takes precedence over the compact form in pkg/worker.
			c.Env = append(c.Env, corev1.EnvVar{Name: worker.EnvShards, Value: strings.Join(shardNames, ",")})
		}
	}
	var labels map[string]string
	for _, l := range []string{QueueLabel, PriorityClassLabel} {
		if v, ok := orig.Labels[l]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[l] = v
		}
	}
	k := int32(len(indexes))
	spec := batchv1.JobSpec{
		Completions:    ptr.To(k),
		Parallelism:    ptr.To(k),
		CompletionMode: ptr.To(batchv1.IndexedCompletion),
		// Suspended until the account names it, so that no pod runs unaccounted; Kueue
		// unsuspends a queued Job when it admits it, repair unsuspends the others.
		Suspend: ptr.To(true),
		// The original's failure handling. Its successPolicy names original indexes and
		// is dropped: a repair Job must run every one of its indexes. So is
		// ttlSecondsAfterFinished: the account keeps coverage only of Jobs that exist.
		BackoffLimit:          orig.Spec.BackoffLimit,
		BackoffLimitPerIndex:  orig.Spec.BackoffLimitPerIndex,
		PodFailurePolicy:      orig.Spec.PodFailurePolicy.DeepCopy(),
		ActiveDeadlineSeconds: orig.Spec.ActiveDeadlineSeconds,
		PodReplacementPolicy:  orig.Spec.PodReplacementPolicy,
		Template:              *tmpl,
	}
	if mfi := orig.Spec.MaxFailedIndexes; mfi != nil {
		spec.MaxFailedIndexes = ptr.To(min(*mfi, k))
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: orig.Namespace, Labels: labels,
			Annotations: map[string]string{
				v1alpha1.AnnotationRepairFor:    accountName,
				v1alpha1.AnnotationRepairOf:     origName,
				v1alpha1.AnnotationRepairShards: shards,
			},
		},
		Spec: spec,
	}
}
