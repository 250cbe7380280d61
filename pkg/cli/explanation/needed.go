package explanation

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/output"
	"batchledger.dev/batchledger/pkg/indexset"
)

// maxListed bounds the identities or shards named inline in one sentence.
const maxListed = 4

// stillNeeded derives, from the conditions in the order they build the verdict, what
// must happen before the batch is Accepted. Each entry says what is missing and, where
// there is one, the action that supplies it.
func stillNeeded(ba *v1alpha1.BatchAccount, m *account.Mapping, ex *Explanation) []string {
	st := &ba.Status
	var out []string
	if len(st.Conditions) == 0 {
		return []string{"The controller has not written this account's status yet: check that the batchledger controller is running."}
	}
	if st.ObservedGeneration < ba.Generation {
		out = append(out, fmt.Sprintf("The status describes spec generation %d; the spec is at generation %d: wait for the controller to observe the latest spec.",
			st.ObservedGeneration, ba.Generation))
	}
	if ex.Verdict.Accepted {
		return out
	}
	notTrue := func(t string) *metav1.Condition {
		c := meta.FindStatusCondition(st.Conditions, t)
		if c != nil && c.Status == metav1.ConditionTrue {
			return nil
		}
		if c == nil {
			c = &metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: "Unknown", Message: "not reported"}
		}
		return c
	}
	if c := notTrue(v1alpha1.ConditionAssignmentValid); c != nil {
		// Coverage, termination and results are judged through the mapping: nothing
		// else is worth doing before it is a partition.
		return append(out, fmt.Sprintf("Fix the assignment mapping (AssignmentValid=%s, %s): %s.", c.Status, c.Reason, c.Message))
	}
	groups := groupMissing(ba, m)
	refused := repairRefusal(ba, m, groups)
	if c := notTrue(v1alpha1.ConditionShardsCovered); c != nil {
		out = append(out, coverageNeeds(ba, ex, groups, refused, c)...)
	}
	if c := notTrue(v1alpha1.ConditionTerminated); c != nil {
		for _, j := range ex.Jobs {
			switch {
			case j.Deleted && j.Terminal.Condition == "":
				out = append(out, fmt.Sprintf("%s was deleted before it terminated: it can never record Complete. Once repairs cover its shards it stands like a failed Job (see the shards above).", j.Description))
			case j.Deleted:
				// Its record stands: it terminated before it was deleted.
			case !j.Found:
				out = append(out, fmt.Sprintf("%s must exist and record Complete or Failed.", j.Description))
			case j.Terminal.Condition == "" && j.Terminal.SuccessCriteriaMet:
				out = append(out, fmt.Sprintf("%s must record Complete: SuccessCriteriaMet is recorded, Complete follows once all its pods terminated.", j.Description))
			case j.Terminal.Condition == "":
				out = append(out, fmt.Sprintf("%s must record Complete (or Failed): coverage does not imply termination.", j.Description))
			}
		}
	}
	if c := notTrue(v1alpha1.ConditionResultsAccepted); c != nil {
		switch c.Reason {
		case v1alpha1.ReasonRuleInvalid:
			out = append(out, fmt.Sprintf("Fix spec.acceptance.rule (ResultsAccepted=%s, %s): %s.", c.Status, c.Reason, c.Message))
		case v1alpha1.ReasonResultRejected, v1alpha1.ReasonMissingResult:
			// The identities completed those indexes: they will not run them again, so
			// asking them for another result would be a dead end. A repair re-runs them.
			var what []string
			if ex.Results.RejectedShards != "" {
				n := ordinalCount(ba.Status.Results.RejectedOrdinals)
				what = append(what, output.Plural(n, "shard ", "shards ")+ex.Results.RejectedShards+output.Plural(n, " has", " have")+" only rejected results")
			} else if c.Reason == v1alpha1.ReasonResultRejected {
				what = append(what, "some shards have only rejected results ("+c.Message+")")
			}
			if ex.Results.MissingShards != "" {
				what = append(what, "no result can arrive for "+output.Plural(int(ex.Results.Missing), "shard ", "shards ")+ex.Results.MissingShards+" (the identity terminated or was deleted, and no pod is left that can report one)")
			}
			rerun := fmt.Sprintf("Run `kubectl batchledger repair %s -n %s` to re-run them in a follow-up Job joined by a repair assignment", ba.Name, ba.Namespace)
			kinds, plain := childKinds(m, ba.Status.Results.RejectedOrdinals, ba.Status.Results.MissingOrdinals)
			switch {
			case len(kinds) > 0:
				// repair refuses shards of JobSet and TrainJob children: their owner re-runs them.
				rerun = "Some are assigned to " + ownerNames(kinds) + " children, which `kubectl batchledger repair` does not re-run: " + OwnerRemedy(kinds, groups.ownersEnded)
				if plain && !refused.stale && !refused.truncated {
					rerun += "; it re-runs those of plain Jobs once no shard of a child is left to re-run (until then it refuses the whole plan)"
				}
			case refused.refused():
				rerun = upperFirst(refused.say(ba, "them"))
			}
			out = append(out, fmt.Sprintf("%s: %s; the identities that completed them cannot report again. %s; each result must carry input revision %s and model revision %s.",
				ex.Results.summaryHead(ex.Shards), strings.Join(what, "; "), rerun, ba.Spec.InputRevision, ba.Spec.ModelRevision))
		default:
			need := fmt.Sprintf("Shard results: %s. Each worker reports its shard, input revision %s and model revision %s in its termination message",
				c.Message, ba.Spec.InputRevision, ba.Spec.ModelRevision)
			if ex.Results.Rule != "" {
				need += "; a result is accepted when it meets `" + ex.Results.Rule + "`"
			}
			out = append(out, need+".")
		}
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("Accepted=False (%s): %s.", ex.Verdict.Reason, ex.Verdict.Message))
	}
	return out
}

// missingGroups are the missing shards grouped by what they wait for.
type missingGroups struct {
	// pending may still be covered by an identity; absent are assigned only to a Job that
	// does not exist; lost can no longer be covered by any identity of a plain Job.
	pending, absent, lost *shardGroup
	// childLost are the lost shards of children, by their owner's target kind: each
	// owner re-runs its own.
	childLost map[string]*shardGroup
	// listed counts the missing ordinals the status lists.
	listed int
	// absentOwners name the owners of the absent children ("JobSet train"), in order
	// of first appearance; absentJobs is set when some absent target is a plain Job.
	absentOwners []string
	absentJobs   bool
	// ownersEnded is set unless the controller awaits a child's owner (Terminated
	// AwaitingTermination): an owner that ended restarts no child. The status says
	// which owners it awaits only in words, so this holds for all children, as in watch.
	ownersEnded bool
}

// groupMissing groups every missing shard the status lists, not only the rows the
// explanation shows: a shard no identity can cover behind many that wait needs a repair
// as much, and each group is counted whole.
func groupMissing(ba *v1alpha1.BatchAccount, m *account.Mapping) missingGroups {
	st := &ba.Status
	targets := NewObservedTargets(st)
	// Only repair identities can add to what a shard waits for: find them once, not once
	// per shard of a large batch.
	repairs := repairRuns(m)
	g := missingGroups{
		pending:   newShardGroup(func(id Identity) bool { return !id.Final }),
		absent:    newShardGroup(func(Identity) bool { return false }), // their one state is what the sentence says
		lost:      newShardGroup(func(Identity) bool { return true }),
		childLost: map[string]*shardGroup{},
	}
	g.ownersEnded = !account.AwaitsTermination(st)
	for _, sg := range []*shardGroup{g.pending, g.absent, g.lost} {
		sg.name = m.Shards.Name
	}
	missing, _ := indexset.Parse(st.Shards.MissingOrdinals)
	g.listed = missing.Count()
	missing.Each(func(o int) bool {
		if o >= m.Shards.Count() {
			// A status not yet judged against a spec of fewer shards: no shard is named so.
			return false
		}
		// The shard is named only if its group lists it (shardGroup.name).
		ms := MissingShard{Ordinal: o, WaitsFor: waitsFor(m, repairs, targets, o)}
		final := true
		for _, id := range ms.WaitsFor {
			final = final && id.Final
		}
		switch {
		case len(ms.WaitsFor) == 1 && ms.WaitsFor[0].State == stateNotFound:
			g.absent.add(ms)
			if ref, _ := v1alpha1.TargetKey(ms.WaitsFor[0].Target).Ref(); ref.IsChild() {
				if owner := ownerNames([]string{ref.Kind()}) + " " + ref.Owner(); !slices.Contains(g.absentOwners, owner) {
					g.absentOwners = append(g.absentOwners, owner)
				}
			} else {
				g.absentJobs = true
			}
		case !final:
			g.pending.add(ms)
		case len(ms.WaitsFor) > 0 && v1alpha1.TargetKey(ms.WaitsFor[0].Target).IsChild():
			kind := targetKind(ms.WaitsFor[0].Target)
			if g.childLost[kind] == nil {
				g.childLost[kind] = newShardGroup(g.lost.shown)
				g.childLost[kind].name = m.Shards.Name
			}
			g.childLost[kind].add(ms)
		default:
			g.lost.add(ms)
		}
		return true
	})
	return g
}

// refusal is why `kubectl batchledger repair` would refuse the account's whole plan, as
// far as the status decides it (repair.NewPlan refuses the same); the zero value when it
// would plan.
type refusal struct {
	// stale is set while the status judges another spec generation than the spec's.
	stale bool
	// truncated is set when the status names only the lowest of the shards to re-run.
	truncated bool
	// children are the target kinds of the children with shards to re-run.
	children []string
}

// refused reports whether repair would refuse the account.
func (r refusal) refused() bool { return r.stale || r.truncated || len(r.children) > 0 }

// say says what repair does instead of re-running the shards it (or them) names.
func (r refusal) say(ba *v1alpha1.BatchAccount, it string) string {
	if r.stale {
		return fmt.Sprintf("once the controller has observed the latest spec, `kubectl batchledger repair %s -n %s` can re-run %s (it refuses a status of an older spec generation)",
			ba.Name, ba.Namespace, it)
	}
	if r.truncated {
		return "`kubectl batchledger repair` refuses this account: the status names only the lowest of the shards to re-run and repair needs the whole list; " +
			"split the batch into smaller accounts, or create a follow-up Job from the Jobs' own status and append its repair assignment to spec.repairs by hand"
	}
	return fmt.Sprintf("`kubectl batchledger repair %s -n %s` would re-run %s in a follow-up Job, but it refuses the whole plan while shards of %s children are to be re-run too: "+
		"run it once those are re-run, or append a repair assignment to spec.repairs by hand", ba.Name, ba.Namespace, it, ownerNames(r.children))
}

// repairRefusal says whether `kubectl batchledger repair` would refuse the account: it
// needs a status of the current spec generation and the whole list of shards to re-run,
// and refuses every shard, those of plain Jobs too, while one it would re-run is assigned
// to a JobSet or TrainJob child.
func repairRefusal(ba *v1alpha1.BatchAccount, m *account.Mapping, g missingGroups) refusal {
	st := &ba.Status
	requireResults := ba.Spec.Acceptance != nil && ba.Spec.Acceptance.RequireResults
	if st.ObservedGeneration != ba.Generation {
		// repair plans from the status only once it judges the spec as it is.
		return refusal{stale: true}
	}
	if st.Shards.MissingOrdinalsTruncated || (requireResults && st.Results.OrdinalsTruncated) {
		return refusal{truncated: true}
	}
	kinds := slices.Collect(maps.Keys(g.childLost))
	if requireResults {
		rk, _ := childKinds(m, st.Results.RejectedOrdinals, st.Results.MissingOrdinals)
		kinds = append(kinds, rk...)
	}
	slices.Sort(kinds)
	return refusal{children: sortedKinds(slices.Compact(kinds))}
}

// coverageNeeds says, per group of missing shards, what they wait for: identities that
// may still complete, identities that never will (a repair re-runs them, unless it
// refuses the account), or targets that do not exist.
func coverageNeeds(ba *v1alpha1.BatchAccount, ex *Explanation, g missingGroups, refused refusal, c *metav1.Condition) []string {
	head := fmt.Sprintf("%d/%d shards covered", ex.Shards.Covered, ex.Shards.Total)
	var out []string
	if p := g.pending; p.shards > 0 {
		out = append(out, fmt.Sprintf("%s: %s %s for %s to complete.", head, p.names(), output.Plural(p.shards, "waits", "wait"), p.identities()))
	}
	if a := g.absent; a.shards > 0 {
		// A child Job counts only when its owner creates it (a Job created by hand under
		// its name is no child): the owner is what to create.
		var create []string
		if g.absentJobs {
			create = append(create, "create it")
		}
		if len(g.absentOwners) > 0 {
			owners := g.absentOwners[:min(len(g.absentOwners), maxListed)]
			s := fmt.Sprintf("a child Job is created by its owner, %s: create %s or, if %s, wait for %s",
				strings.Join(owners, ", "), output.Plural(len(owners), "it", "them"), output.Plural(len(owners), "it exists", "they exist"), output.Plural(len(owners), "it", "them"))
			if more := len(g.absentOwners) - len(owners); more > 0 {
				s = fmt.Sprintf("a child Job is created by its owner, %s and %d more: create them or, if they exist, wait for them", strings.Join(owners, ", "), more)
			}
			create = append(create, s)
		}
		out = append(out, fmt.Sprintf("%s: %s %s assigned to %s, which does not exist: %s.", head, a.names(), output.Plural(a.shards, "is", "are"), a.identities(), strings.Join(create, "; ")))
	}
	if l := g.lost; l.shards > 0 {
		rerun := fmt.Sprintf("Run `kubectl batchledger repair %s -n %s` to re-run %s in a follow-up Job joined by a repair assignment", ba.Name, ba.Namespace, output.Plural(l.shards, "it", "them"))
		if refused.refused() {
			rerun = upperFirst(refused.say(ba, output.Plural(l.shards, "it", "them")))
		}
		out = append(out, fmt.Sprintf("%s: %s can no longer be covered by %s. %s.", head, l.names(), l.identities(), rerun))
	}
	for _, kind := range sortedKinds(slices.Collect(maps.Keys(g.childLost))) {
		l := g.childLost[kind]
		out = append(out, fmt.Sprintf("%s: %s can no longer be covered by %s. `kubectl batchledger repair` does not re-run %s children: %s.",
			head, l.names(), l.identities(), ownerNames([]string{kind}), OwnerRemedy([]string{kind}, g.ownersEnded)))
	}
	if n := ex.Shards.MissingUnrecorded; n > 0 {
		out = append(out, fmt.Sprintf("%d more missing %s not in the status's list, which names only the lowest %d: what they wait for is not recorded (missing: %s).",
			n, output.Plural(n, "shard is", "shards are"), g.listed, ex.Shards.Missing))
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("Cover the missing shards (ShardsCovered=%s, %s): %s.", c.Status, c.Reason, c.Message))
	}
	return out
}

// upperFirst starts s with a capital letter: a clause used as a sentence.
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// shardGroup is missing shards the advice treats alike: the first maxListed of them and of
// their identities, with how many there are in all, so that a group of 100,000 shards is
// named in a line and counted exactly.
type shardGroup struct {
	// shown tells the identities whose state is said.
	shown func(Identity) bool
	// name, when set, names the shards added without a name, as they are listed.
	name   func(int) string
	listed []MissingShard
	shards int
	ids    []Identity
	allIDs int
	// common is the state of the first identity; isCommon holds while every identity
	// added since is shown and shares it.
	common   string
	isCommon bool
}

func newShardGroup(shown func(Identity) bool) *shardGroup { return &shardGroup{shown: shown} }

func (g *shardGroup) add(ms MissingShard) {
	if len(g.listed) < maxListed {
		if ms.Shard == "" && g.name != nil {
			ms.Shard = g.name(ms.Ordinal)
		}
		g.listed = append(g.listed, ms)
	}
	g.shards++
	for _, id := range ms.WaitsFor {
		if g.allIDs == 0 {
			g.common, g.isCommon = id.State, g.shown(id)
		} else if !g.shown(id) || id.State != g.common {
			g.isCommon = false
		}
		if len(g.ids) < maxListed {
			g.ids = append(g.ids, id)
		}
		g.allIDs++
	}
}

// names names the group's shards, at most maxListed of them.
func (g *shardGroup) names() string {
	names := make([]string, 0, len(g.listed))
	for _, ms := range g.listed {
		names = append(names, ms.Shard)
	}
	s := output.Plural(g.shards, "shard ", "shards ") + strings.Join(names, ", ")
	if more := g.shards - len(names); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// identities names the group's identities, at most maxListed, with the states shown; a
// state shared by every identity is said once.
func (g *shardGroup) identities() string {
	common := ""
	if g.isCommon {
		common = g.common
	}
	parts := make([]string, 0, len(g.ids))
	for _, id := range g.ids {
		p := fmt.Sprintf("%s index %d", v1alpha1.TargetKey(id.Target).Describe(), id.Index)
		if common == "" && g.shown(id) {
			p += " (" + id.State + ")"
		}
		parts = append(parts, p)
	}
	s := strings.Join(parts, ", ")
	if more := g.allIDs - len(parts); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	if common != "" {
		s += " (" + common + ")"
	}
	return s
}

// ShardNames names the shards of a group, at most maxListed of them.
func ShardNames(shards []MissingShard) string {
	g := newShardGroup(func(Identity) bool { return false })
	for _, ms := range shards {
		g.add(ms)
	}
	return g.names()
}

// Identities names the identities of a group, at most maxListed, with the states of
// those that may still complete (of all with withState); a state shared by every
// identity is said once.
func Identities(shards []MissingShard, withState bool) string {
	g := newShardGroup(func(id Identity) bool { return withState || !id.Final })
	for _, ms := range shards {
		g.add(ms)
	}
	return g.identities()
}

// summaryHead is "2/4 shard results accepted".
func (r *ResultsExplanation) summaryHead(s ShardsExplanation) string {
	return fmt.Sprintf("%d/%d shard results accepted", s.Accepted, s.Total)
}

// childKinds are the target kinds (TargetKindJobSet, TargetKindTrainJob) of the children
// the shards of the ordinal lists (interval format) are assigned to, in sortedKinds
// order, and whether some are assigned to plain Jobs.
func childKinds(m *account.Mapping, lists ...string) ([]string, bool) {
	seen := map[string]bool{}
	plain := false
	for _, l := range lists {
		set, _ := indexset.Parse(l)
		set.Each(func(o int) bool {
			if key, _, ok := m.IdentityOf(o); ok && v1alpha1.TargetKey(key).IsChild() {
				seen[targetKind(key)] = true
			} else if ok {
				plain = true
			}
			return !plain || len(seen) < len(v1alpha1.ChildTargetKinds())
		})
	}
	return sortedKinds(slices.Collect(maps.Keys(seen))), plain
}

// childOwner is how the advice speaks of the owner of a child target: its kind's name,
// and what re-runs the child's shards in place of `kubectl batchledger repair`.
type childOwner struct{ name, rerun string }

// childOwners are the owners of child targets by target kind. A JobSet restarts its
// children itself; a TrainJob's nodes are the ranks of one training run, so the
// TrainJob is re-submitted (docs/user-guide.md; repair says the same, OwnerRemedy). A
// kind left out gets generic advice. The kinds cannot say it themselves: their seam
// (pkg/kinds) links controller-runtime, which this package may not.
var childOwners = map[string]childOwner{
	v1alpha1.TargetKindJobSet:   {"JobSet", "a JobSet restart re-runs its children under new identities"},
	v1alpha1.TargetKindTrainJob: {"TrainJob", "re-submit the TrainJob (its nodes are the ranks of one training run, not independent work)"},
}

// targetKind is the kind of the target of key ("" when key is no target key).
func targetKind(key string) string {
	r, _ := v1alpha1.TargetKey(key).Ref()
	return r.Kind()
}

// sortedKinds orders target kinds as the API orders child owners
// (v1alpha1.ChildTargetKinds: JobSet, then TrainJob), any other last.
func sortedKinds(kinds []string) []string {
	order := v1alpha1.ChildTargetKinds()
	rank := func(k string) int {
		if i := slices.Index(order, k); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	return kinds
}

// ownerNames names the owners of kinds: "JobSet", "JobSet or TrainJob".
func ownerNames(kinds []string) string {
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, OwnerName(k))
	}
	return strings.Join(names, " or ")
}

// OwnerName is how advice names the owner of a child target of kind (a
// v1alpha1.TargetKind*): "JobSet", "TrainJob"; the kind itself for one it does not know.
func OwnerName(kind string) string {
	if o, ok := childOwners[kind]; ok {
		return o.name
	}
	return kind
}

// OwnerRemedy says what re-runs the shards of children of kinds (v1alpha1.TargetKind*)
// in place of `kubectl batchledger repair`: their owner, unless it is a JobSet that ended
// (ended: it recreates no child, docs/user-guide.md), and otherwise a repair assignment
// appended by hand. explain and repair both say it.
func OwnerRemedy(kinds []string, ended bool) string {
	const byHand = "append a repair assignment to spec.repairs by hand"
	reruns := make([]string, 0, len(kinds))
	jobSetEnded := false
	for _, k := range kinds {
		o, ok := childOwners[k]
		switch {
		case k == v1alpha1.TargetKindJobSet && ended:
			jobSetEnded = true
		case ok:
			reruns = append(reruns, o.rerun)
		default:
			reruns = append(reruns, "its owner may re-run a "+k+" child")
		}
	}
	if len(reruns) == 0 {
		return "a JobSet that ended recreates no child: " + byHand
	}
	s := strings.Join(reruns, "; ")
	if jobSetEnded {
		s += " (a JobSet that ended recreates no child)"
	}
	return s + "; otherwise " + byHand
}

// ordinalCount is the number of ordinals in an interval list (0 when it does not parse).
func ordinalCount(s string) int {
	set, _ := indexset.Parse(s)
	return set.Count()
}
