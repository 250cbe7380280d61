// Package webhook holds batchledger's admission webhooks. The BatchAccount validator
// rejects mappings that are not a partition before they reach the cluster, with the same
// reasons the account status would show.
package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"batchledger.dev/batchledger/pkg/acceptance"
	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/relations"
)

// ValidatePath is where the BatchAccount validating webhook is served.
const ValidatePath = "/validate-batchledger-dev-v1alpha1-batchaccount"

// BatchAccountValidator validates BatchAccount creates and updates.
type BatchAccountValidator struct {
	// Admitted remembers each account admitted, for the scope webhook (nil: none).
	Admitted *AdmittedAccounts
	// Jobs reads the targets' Jobs (relations.JobsFrom: Jobs from the API server, which
	// holds one not labelled yet, and a JobSet or TrainJob from the manager's cache), to
	// freeze the mapping of a target whose Job runs before the account's status says so
	// (nil: the status alone).
	Jobs client.Reader
}

var _ admission.Validator[*v1alpha1.BatchAccount] = BatchAccountValidator{}

// +kubebuilder:webhook:path=/validate-batchledger-dev-v1alpha1-batchaccount,mutating=false,failurePolicy=fail,sideEffects=None,groups=batchledger.dev,resources=batchaccounts,verbs=create;update,versions=v1alpha1,name=vbatchaccount.batchledger.dev,admissionReviewVersions=v1

// SetupWithManager registers the validator on the manager's webhook server.
func (v BatchAccountValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.BatchAccount{}).WithValidator(v).Complete()
}

// ValidateCreate rejects a mapping that is not a partition of the declared shards.
func (v BatchAccountValidator) ValidateCreate(ctx context.Context, ba *v1alpha1.BatchAccount) (admission.Warnings, error) {
	if err := validateSpec(ba); err != nil {
		return nil, err
	}
	if err := acceptanceApplies(nil, ba); err != nil {
		return nil, err
	}
	v.Admitted.remember(ctx, ba)
	return ruleWarnings(nil, ba), nil
}

// ruleWarnings are acceptance.Warnings of ba's rule, when it is new (old nil) or changed.
func ruleWarnings(old, ba *v1alpha1.BatchAccount) admission.Warnings {
	rule := ba.Spec.AcceptanceRule()
	if rule == "" || old != nil && old.Spec.AcceptanceRule() == rule {
		return nil
	}
	return acceptance.Warnings(rule)
}

// ValidateUpdate additionally freezes the revisions, the mapping and the requirement of
// results once work was done under the account (BatchAccountStatus.WorkDone), or a
// target's Job runs (runningTarget): work done under a mapping must be judged by that
// mapping, and results judged, rejected or still due must go on counting. Appending
// repair assignments (to spec.assignments, or to spec.repairs) stays allowed, since that
// is how a team re-runs missing shards; so does starting to require results, which only
// asks more of the batch.
func (v BatchAccountValidator) ValidateUpdate(ctx context.Context, old, ba *v1alpha1.BatchAccount) (admission.Warnings, error) {
	work := old.Status.WorkDone()
	if work == "" && v.Jobs != nil && !equality.Semantic.DeepEqual(old.Spec, ba.Spec) {
		var err error
		if work, err = runningTarget(ctx, v.Jobs, old); err != nil {
			return nil, fmt.Errorf("BatchAccount %s: reading its targets' Jobs: %w", ba.Name, err)
		}
	}
	// A repair entry may be taken out only while no work was done under its Job, and
	// its Job's pods are told their shards before the status shows that it runs. Only
	// the entries the update takes out or changes are read: an append (kubectl
	// batchledger repair) reads nothing, and no unrelated Job's read can refuse it.
	var running []v1alpha1.TargetKey
	if changed := changedRepairs(old, ba); v.Jobs != nil && work != "" && len(changed) > 0 {
		var err error
		if running, err = runningTargets(ctx, v.Jobs, old.Namespace, changed, false); err != nil {
			return nil, fmt.Errorf("BatchAccount %s: reading its repairs' Jobs: %w", ba.Name, err)
		}
	}
	if err := validateUpdate(old, ba, work, running); err != nil {
		return nil, err
	}
	// An update of the metadata alone names no new target: the cache's copy serves.
	if !equality.Semantic.DeepEqual(old.Spec, ba.Spec) {
		v.Admitted.remember(ctx, ba)
	}
	return ruleWarnings(old, ba), nil
}

// runningTarget names the first target of ba whose Job runs, or has run ("" when none
// does): its pods are told their shards under the mapping from their creation on, which
// may be up to --waiting-status-delay before the account's status shows the Job's
// admission or start. A Job that is not suspended runs: Kueue unsuspends a Job it
// admitted before its pods are created, and a Job without Kueue runs from its creation.
func runningTarget(ctx context.Context, jobs client.Reader, ba *v1alpha1.BatchAccount) (string, error) {
	running, err := runningTargets(ctx, jobs, ba.Namespace, ba.Spec.AllAssignments(), true)
	if err != nil || len(running) == 0 {
		return "", err
	}
	return string(running[0]) + " runs", nil
}

// runningTargets are the targets of assignments, entries of an account in namespace,
// whose Job runs, or has run (targetRuns), each once, in the order the assignments
// first name them; first stops at the first one found, reading no further Job.
func runningTargets(ctx context.Context, jobs client.Reader, namespace string, assignments []v1alpha1.Assignment, first bool) ([]v1alpha1.TargetKey, error) {
	var out []v1alpha1.TargetKey
	seen := map[v1alpha1.TargetKey]bool{}
	for _, a := range assignments {
		key := a.Target.Key()
		if seen[key] {
			continue
		}
		seen[key] = true
		runs, err := targetRuns(ctx, jobs, namespace, a.Target)
		if err != nil {
			return nil, err
		}
		if runs {
			out = append(out, key)
			if first {
				break
			}
		}
	}
	return out, nil
}

// targetRuns reports whether the Job the target ref names in namespace runs, or has
// run: it is not suspended, it started, or it is suspended again after it ran (jobRan).
// A child of an owner MultiKueue dispatches has no Job here: it runs on a worker cluster
// once its owner does (kinds.Dispatcher.DispatchedOwnerRan).
func targetRuns(ctx context.Context, jobs client.Reader, namespace string, ref v1alpha1.TargetRef) (bool, error) {
	k := relations.KindOf(ref)
	if k == nil || ref.Namespace != "" && ref.Namespace != namespace {
		return false, nil
	}
	job, _, err := k.Resolve(ctx, jobs, namespace, ref)
	runs := job != nil && (job.Status.StartTime != nil || job.Spec.Suspend == nil || !*job.Spec.Suspend || jobRan(job))
	if d, ok := k.(kinds.Dispatcher); ok && err == nil && job == nil && ref.IsChild() {
		runs, err = d.DispatchedOwnerRan(ctx, jobs, namespace, ref)
	}
	switch {
	case apimeta.IsNoMatchError(err):
		return false, nil // the kind's API is not served: no such Job runs
	case err != nil:
		return false, err
	}
	return runs, nil
}

// jobRan reports whether a suspended Job's status shows that pods of it ran. Kueue
// preempts a Job by suspending it again, and the Job controller then clears its
// startTime; its indexes completed or failed, its pods counted and those still stopping
// (which may yet exit 0 and complete their index) stay in its status.
func jobRan(job *batchv1.Job) bool {
	s := &job.Status
	u := s.UncountedTerminatedPods
	return s.CompletedIndexes != "" || s.FailedIndexes != nil && *s.FailedIndexes != "" ||
		s.Succeeded > 0 || s.Failed > 0 || s.Active > 0 || s.Terminating != nil && *s.Terminating > 0 ||
		u != nil && len(u.Succeeded)+len(u.Failed) > 0
}

// validateUpdate is ValidateUpdate's verdict, given the first sign of work under old
// ("" for none) and the targets of old's repairs whose Job runs (nil: none known).
func validateUpdate(old, ba *v1alpha1.BatchAccount, work string, running []v1alpha1.TargetKey) error {
	if equality.Semantic.DeepEqual(old.Spec, ba.Spec) {
		// Metadata alone: an account admitted before stays admissible, whatever rules
		// were added since.
		return nil
	}
	if err := validateSpec(ba); err != nil {
		return err
	}
	if err := acceptanceApplies(old, ba); err != nil {
		return err
	}
	if work == "" {
		return nil
	}
	switch {
	case old.Spec.InputRevision != ba.Spec.InputRevision || old.Spec.ModelRevision != ba.Spec.ModelRevision:
		return fmt.Errorf("BatchAccount %s: revisions are immutable once work was done under them (%s)", ba.Name, work)
	case !equality.Semantic.DeepEqual(old.Spec.Shards, ba.Spec.Shards):
		return fmt.Errorf("BatchAccount %s: spec.shards is immutable once work was done under it (%s)", ba.Name, work)
	case len(ba.Spec.Assignments) < len(old.Spec.Assignments) ||
		!equality.Semantic.DeepEqual(old.Spec.Assignments, ba.Spec.Assignments[:len(old.Spec.Assignments)]):
		return fmt.Errorf("BatchAccount %s: assignments are immutable once work was done under them (%s); only repair assignments may be appended", ba.Name, work)
	case !repairsKept(old, ba, running):
		return fmt.Errorf("BatchAccount %s: repairs are immutable once work was done under them (%s); repairs may only be appended, "+
			"or taken out again while no work was done under their Job", ba.Name, work)
	case old.Spec.RequiresResults() && !ba.Spec.RequiresResults():
		return fmt.Errorf("BatchAccount %s: spec.acceptance.requireResults cannot be turned off once work was done under it (%s): "+
			"the results judged, rejected or still due would stop counting. Create a new BatchAccount without results naming the same Jobs", ba.Name, work)
	case old.Spec.RequiresResults() && old.Status.Results.Recorded > 0 && resultContainer(&old.Spec) != resultContainer(&ba.Spec):
		return fmt.Errorf("BatchAccount %s: spec.acceptance.resultContainer cannot change once results were read from it (status.results.recorded > 0)", ba.Name)
	}
	for i, a := range ba.Spec.Assignments[len(old.Spec.Assignments):] {
		if !a.Repair {
			return fmt.Errorf("BatchAccount %s: assignments[%d] must be marked repair: work was already done under this mapping (%s)", ba.Name, len(old.Spec.Assignments)+i, work)
		}
	}
	return nil
}

// repairsKept reports whether ba's spec.repairs are old's in order, less only entries
// under whose target old's status shows no work and whose Job does not run (running;
// kubectl batchledger repair takes its entries out again when it cannot create all
// their Jobs, deleting those it created), followed by any appended.
func repairsKept(old, ba *v1alpha1.BatchAccount, running []v1alpha1.TargetKey) bool {
	for _, e := range changedRepairs(old, ba) {
		if workedOn(old, e.Target) || slices.Contains(running, e.Target.Key()) {
			return false
		}
	}
	return true
}

// changedRepairs are the entries of old's spec.repairs that ba takes out or changes,
// reading ba's spec.repairs as old's in order less those, followed by any appended.
func changedRepairs(old, ba *v1alpha1.BatchAccount) []v1alpha1.Assignment {
	var out []v1alpha1.Assignment
	next := 0
	for _, e := range old.Spec.Repairs {
		if next < len(ba.Spec.Repairs) && equality.Semantic.DeepEqual(e, ba.Spec.Repairs[next]) {
			next++
			continue
		}
		out = append(out, e)
	}
	return out
}

// workedOn reports whether ba's status shows work under the target ref (TargetStatus.Work), or a
// superseded identity of it.
func workedOn(ba *v1alpha1.BatchAccount, ref v1alpha1.TargetRef) bool {
	key := string(ref.Key())
	for _, h := range ba.Status.History {
		if h.Target == key {
			return true
		}
	}
	for i := range ba.Status.Targets {
		if t := &ba.Status.Targets[i]; t.Name == key {
			return t.Work() != ""
		}
	}
	return false
}

// acceptanceApplies refuses, as the CRD does, an acceptance rule or resultContainer
// without requireResults: no result is read or judged then, and the batch would be
// Accepted on coverage alone while its spec names the criterion its results must meet.
// The webhook repeats the CRD's rule for an API server still serving an earlier CRD
// (helm upgrade leaves CRDs as they are), and, as the API server ratchets it, only of an
// acceptance that is new (old nil: a create) or changed.
func acceptanceApplies(old, ba *v1alpha1.BatchAccount) error {
	a := ba.Spec.Acceptance
	if a == nil || a.RequireResults || a.Rule == "" && a.ResultContainer == "" ||
		old != nil && equality.Semantic.DeepEqual(old.Spec.Acceptance, a) {
		return nil
	}
	return fmt.Errorf("BatchAccount %s: spec.acceptance: rule and resultContainer apply only with requireResults: true: "+
		"without it no result is read or judged, and the batch is Accepted on coverage alone", ba.Name)
}

// resultContainer is the container the spec reads results from ("" for the default).
func resultContainer(spec *v1alpha1.BatchAccountSpec) string {
	if spec.Acceptance == nil {
		return ""
	}
	return spec.Acceptance.ResultContainer
}

// ValidateDelete allows every delete.
func (BatchAccountValidator) ValidateDelete(context.Context, *v1alpha1.BatchAccount) (admission.Warnings, error) {
	return nil, nil
}

func validateSpec(ba *v1alpha1.BatchAccount) error {
	if a := ba.Spec.Acceptance; a != nil && a.Rule != "" {
		if _, err := acceptance.Compile(a.Rule); err != nil {
			return fmt.Errorf("BatchAccount %s: spec.acceptance.rule: %w", ba.Name, err)
		}
	}
	m := account.Compile(ba.Namespace, &ba.Spec)
	if len(m.Problems) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(m.Problems))
	for _, p := range m.Problems {
		msgs = append(msgs, fmt.Sprintf("%s: %s", p.Reason, p.Message))
	}
	return fmt.Errorf("BatchAccount %s: the assignment mapping is not a partition: %s", ba.Name, strings.Join(msgs, "; "))
}
