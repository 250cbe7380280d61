package account

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/identity"
	"batchledger.dev/batchledger/pkg/indexset"
)

// Terminal conditions, as the Job controller names them.
const (
	TerminalComplete = identity.ConditionComplete
	TerminalFailed   = identity.ConditionFailed
)

// Endings of a child target's owner (a JobSet, or the TrainJob that renders one) an
// Observation reports (OwnerEnded) beside the owner's own terminal condition types
// (Completed, Failed).
const (
	OwnerDeleted      = "deleted"
	OwnerBeingDeleted = "being deleted"
	// OwnerRunning is Observation.ChildOwner's word for an owner that has not ended.
	OwnerRunning = "running"
)

// Observation is what the controller saw of one target at one point, in kind-neutral
// facts (a target kind makes them: pkg/kinds/job for batch/v1 Jobs). A nil Job means the
// target does not exist (yet, or any more).
type Observation struct {
	Job *identity.Job
	// RestartAttempt is the JobSet restart attempt of a child Job.
	RestartAttempt int32
	// DeletedJob, when Job is nil, is the target's Job as it was when it was deleted (the
	// last state its watch delivered). What the Job recorded between the account's last
	// observation and its deletion is part of its record: a Job deleted by its TTL the
	// moment it finished (ttlSecondsAfterFinished: 0) recorded Complete there. For a child
	// target whose owner ended (OwnerEnded), it is the child a MultiKueue worker recorded
	// that never terminated: the owner's end deleted it there, whether or not the account
	// observed that identity before.
	DeletedJob *identity.Job
	// OwnerEnded, for a child target (a JobSet's or a TrainJob's) that is not found,
	// says why its owner will create no more child Jobs: it is gone (OwnerDeleted),
	// being deleted (OwnerBeingDeleted), or recorded its terminal condition (Completed,
	// Failed). Empty while the owner may still (re)create the child. A child gone
	// before it terminated is a restart in progress only while the owner may recreate
	// it; once the owner ended it is a Job deleted before it terminated (JobSet deletes
	// its active children when it finishes or fails).
	OwnerEnded string
	// ChildOwner, for a child target, is how its owner (the JobSet, the TrainJob) stands:
	// OwnerRunning while it may still restart the child, else as OwnerEnded says (unlike
	// OwnerEnded it is set for a child found, and kept for one read from a MultiKueue
	// worker); for a Job target, the same of the owner of its Job when that Job is a
	// child (named by its Job name: a restart recreates it all the same); empty for a
	// target that is no child. An owner that is gone creates
	// no child any more, so a Job of another identity than the one on record is none of
	// its children (Compute keeps the record); a child that Failed while its owner runs
	// may be restarted, so the account waits for the owner's decision.
	ChildOwner string
	// Redispatched, for a child target of an owner MultiKueue dispatches that is not
	// found, says that its previous identity ran in a worker's copy of the owner that
	// Kueue deleted since (it dispatched the Workload to another worker, or evicted it
	// and admitted it again), while the records of the worker it runs on now are not
	// read: the new copy runs the child again, so the identity is superseded (as it is
	// once the new copy's child is recorded), whatever it completed, not kept as the
	// target's record.
	Redispatched bool
	// APINotServed, for a target that is not found, names the API its kind needs that
	// the cluster does not serve ("jobset.x-k8s.io/v1alpha2 JobSet"): the target cannot
	// exist until that API is installed. Empty when the API is served.
	APINotServed string
	// SuccessfulPods are the successful pods of the Job seen now (the Job controller may
	// delete repeats of an index, so the account keeps a ledger of what it saw).
	SuccessfulPods []PodAttempt
	// Unfinished are the completion indexes of the Job's pods seen now that have not
	// finished (pending, running, terminating) and report a result: a pod of an index
	// the Job completed may still show unfinished where the Job's status already counts
	// it (the controller's pod cache lags its Job cache), and its result is to come.
	Unfinished []int
	// Workload is the Kueue Workload the target runs under, if known.
	Workload *v1alpha1.WorkloadObservation
	// PodsListed is true when SuccessfulPods is every successful pod of the Job that
	// still exists (the caller listed them). Only then does a completed index of a
	// terminated Job without a pod and without a recorded result count as a result that
	// can no longer arrive (MissingResult); otherwise it is pending.
	PodsListed bool
	// ResultsOnWorker, for a Job MultiKueue dispatched to a worker cluster, is whether
	// batchledger reads the results its worker role records there (the manager is given
	// worker kubeconfigs). Without it the account says no result is recorded from there.
	ResultsOnWorker bool
	// WorkerProblem, with ResultsOnWorker, says why the worker's results cannot be read
	// now (not reachable since..., no kubeconfig for it); empty while they are read.
	WorkerProblem string
}

// notServed is the sentence on a target whose kind's API the cluster does not serve
// (Observation.APINotServed); "" when it is served or the target was found.
func (o Observation) notServed() string {
	if o.Job != nil || o.APINotServed == "" {
		return ""
	}
	return o.APINotServed + " is not served by this cluster: install it, and batchledger starts following it then"
}

// PodAttempt is one successful pod of an index.
type PodAttempt struct {
	UID   types.UID
	Index int
	// Uncounted is true while the Job controller has not counted this success: the pod
	// still carries its tracking finalizer, or is in the Job's uncountedTerminatedPods. A
	// Job status write follows for each such pod.
	Uncounted bool
	// NoResult is true when the pod reports no result the account reads: batchledger did
	// not see the Job controller create it (relations.ReportsResult). Its index's result
	// cannot come from it.
	NoResult bool
}

// jobFacts are the pieces of a Job the account reads, already interpreted.
type jobFacts struct {
	completions   int
	indexed       bool
	required      indexset.Set
	successPolicy string
	completed     indexset.Set
	failed        indexset.Set
	ignored       []string
	terminal      string
	reason        string
	terminalAt    *metav1.Time
	criteriaMet   bool
	failureTarget bool
}

func readJob(job *identity.Job) jobFacts {
	f := jobFacts{indexed: job.Indexed, completions: int(job.Completions)}
	if n, ok := completedSize(job); ok {
		f.completions = n
	}
	var ign []string
	f.completed, ign = indexset.ParseJobStatus(job.CompletedIndexes, f.completions)
	f.ignored = append(f.ignored, prefixAll("completedIndexes: ", ign)...)
	if job.FailedIndexes != nil {
		f.failed, ign = indexset.ParseJobStatus(*job.FailedIndexes, f.completions)
		f.ignored = append(f.ignored, prefixAll("failedIndexes: ", ign)...)
	}
	f.required, f.successPolicy = requiredPopulation(job.SuccessRules, f.completions)
	for _, c := range job.Conditions {
		switch c.Type {
		case identity.ConditionComplete, identity.ConditionFailed:
			f.terminal, f.reason = c.Type, c.Reason
			f.terminalAt = c.LastTransitionTime.DeepCopy()
		case identity.ConditionSuccessCriteriaMet:
			f.criteriaMet = true
		case identity.ConditionFailureTarget:
			f.failureTarget = true
		}
	}
	return f
}

// completedSize is the size an Indexed Job without a successPolicy completed at, when it
// differs from its completions now: the Job controller records Complete once every index
// below its completions succeeded, and then exactly those are its completedIndexes. A
// finished Job's completions may still change with its parallelism (the API server
// allows it, the Job controller ignores it); read at the new size, the indexes it
// completed would be dropped, or indexes that will never run required.
func completedSize(job *identity.Job) (int, bool) {
	if !job.Indexed || len(job.SuccessRules) > 0 || job.CompletedIndexes == "" || !slices.ContainsFunc(job.Conditions,
		func(c identity.Condition) bool { return c.Type == identity.ConditionComplete }) {
		return 0, false
	}
	done, _ := indexset.ParseJobStatus(job.CompletedIndexes, indexset.MaxIndex+1)
	n := done.Count()
	if n == int(job.Completions) || !done.Equal(indexset.Range(0, n-1)) {
		return 0, false
	}
	return n, true
}

func prefixAll(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// requiredPopulation is the index population the Job's own criterion requires, and the
// criterion in words. Without a successPolicy every index 0..completions-1 is required.
// A policy of a single succeededIndexes rule requires exactly those indexes; policies
// with a count, or several rules (any of which suffices), have no fixed population, so
// every index stays required for mapping purposes and the words say what the Job
// itself will accept.
func requiredPopulation(rules []identity.SuccessRule, completions int) (indexset.Set, string) {
	all := indexset.Range(0, completions-1)
	if len(rules) == 0 {
		return all, ""
	}
	var words []string
	for _, r := range rules {
		// With both, the count is of the listed indexes (the Job controller's rule): "2 of
		// indexes 0-3", never all of them.
		switch n := r.SucceededCount; {
		case n != nil && r.SucceededIndexes != nil:
			words = append(words, fmt.Sprintf("%d of indexes %s succeeded", *n, *r.SucceededIndexes))
		case n != nil:
			words = append(words, fmt.Sprintf("%d %s succeeded", *n, plural(int(*n), "index", "indexes")))
		case r.SucceededIndexes != nil:
			words = append(words, fmt.Sprintf("indexes %s succeeded", *r.SucceededIndexes))
		}
	}
	text := "succeeds when " + strings.Join(words, ", or when ")
	if r := rules[0]; len(rules) == 1 && r.SucceededIndexes != nil && r.SucceededCount == nil {
		set, _ := indexset.ParseJobStatus(*r.SucceededIndexes, completions)
		return set, text
	}
	return all, text
}
