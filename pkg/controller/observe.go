package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
)

// observed is one target's observation plus the Workload object it runs under, which
// the reconciler publishes conditions on.
type observed struct {
	obs account.Observation
	// job is the target's current Job (nil if none), and deletedJob, without one, its last
	// state when it was seen deleted: the objects obs holds the facts of.
	job, deletedJob *batchv1.Job
	workload        *kueue.Workload
	// pods are the target's pods the account reads: of the observed Job (its attempts),
	// and, from the cache of whole pods, of every identity of the target (whose results
	// are captured, relations.TargetPodIndex).
	pods []corev1.Pod
	// recordedOn is, for a dispatched JobSet child, the worker cluster whose WorkerJob
	// job is made from (observeDispatchedChild); "" for a Job of this cluster.
	recordedOn string
	// ownerCreated is, for a dispatched child whose finished owner's Workload is gone,
	// when the owner was created: the admissions on record since are its
	// (workerAdmissions).
	ownerCreated *metav1.Time
	// retainedOn is then the worker and the Workload name of the owner's newest admission
	// on record, where its results are read.
	retainedOn [2]string
}

// observeTarget reads a target's current Job (resolveFollowed), its successful
// pods and its Workload from the cache. A target that does not exist yields an empty
// observation, with, when the account captures results, the pods its deleted identities
// left (a Job deleted, or between a JobSet restart's delete and create), whose results
// are still captured, the last state of a Job seen deleted (DeletedJob), and for a JobSet
// child whether its JobSet ended (OwnerEnded). followed is the identity the account's
// status follows for t (the zero value: none).
func (r *Reconciler) observeTarget(ctx context.Context, namespace string, t account.Target, followed kinds.Followed, results bool) (observed, error) {
	if api, ok := unservedAPI(r.APIs, t.Ref); ok {
		if elsewhere, err := dispatchedWithout(ctx, r.Client, namespace, t.Ref, api); err != nil || elsewhere {
			// What it needs of that API is on a worker cluster: it is observed from the
			// workers' records (observeDispatchedChild), not through that API here.
			if err != nil {
				return observed{}, err
			}
			return r.observeTargetServed(ctx, namespace, t, followed, results)
		}
		// Nothing of its kind is watched or cached (a read would fail). Pods of its Jobs
		// may still be held, from before the API went away: their results are recorded
		// (pods are cached whatever the kinds served), so that they do not wait MaxHold.
		var o observed
		o.obs.APINotServed = api.String()
		var err error
		if results {
			o.pods, err = relations.TargetPods(ctx, r.Client, namespace, t.Ref)
		}
		return o, err
	}
	return r.observeTargetServed(ctx, namespace, t, followed, results)
}

// resolveFollowed is relations.ResolveFollowed through c: the target's Job as the
// account that follows followed for ref (none yet too) follows it. A kinds.CacheLagError
// is returned until CacheLagWait after the later write it names; then what the caches
// show is taken as it is.
func (r *Reconciler) resolveFollowed(ctx context.Context, c client.Reader, namespace string, ref v1alpha1.TargetRef, followed kinds.Followed) (*batchv1.Job, int32, error) {
	job, attempt, err := relations.ResolveFollowed(ctx, c, namespace, ref, followed)
	if lag := (*kinds.CacheLagError)(nil); errors.As(err, &lag) && !r.now().Before(lag.Since.Add(CacheLagWait)) {
		// Caches that disagree this long after the later write do not lag: they show
		// what there is.
		return lag.Job, lag.RestartAttempt, nil
	}
	return job, attempt, err
}

// dispatchedWithout reports whether ref's kind reads api, which this cluster does not
// serve, only beyond its own (kinds.Needing), and ref's owner is dispatched by MultiKueue
// (kinds.Dispatcher): a TrainJob a manager without JobSet's API dispatches, whose
// JobSet Trainer renders on the worker.
func dispatchedWithout(ctx context.Context, c client.Reader, namespace string, ref v1alpha1.TargetRef, api OptionalAPI) (bool, error) {
	k, ok := relations.KindOf(ref).(kinds.Dispatcher)
	if !ok || api.GVK == k.Object() || !ref.IsChild() {
		return false, nil
	}
	owner, err := k.DispatchedOwner(ctx, c, namespace, ref)
	return owner != nil, err
}

// observeTargetServed is observeTarget for a target whose kind's APIs it reads are served,
// or whose unserved one it does not read here (dispatchedWithout).
func (r *Reconciler) observeTargetServed(ctx context.Context, namespace string, t account.Target, followed kinds.Followed, results bool) (observed, error) {
	// A JobSet child being deleted that the record finalizer holds is observed until its
	// end is recorded (jobset.CurrentChild).
	job, attempt, err := r.resolveFollowed(ctx, r.Client, namespace, t.Ref, followed)
	if err == nil && job == nil {
		// Not in the cache: a Job without the scope label on its metadata, which
		// stampTarget adds once this finds it.
		job, attempt, err = r.resolveLive(ctx, namespace, t.Ref, followed)
	}
	if err != nil {
		return observed{}, err
	}
	var o observed
	// How a child target's owner stands, found or not. A dispatched child read from a
	// worker next (observeDispatchedChild) keeps it, though OwnerEnded is cleared: its
	// failure waits for the JobSet as any child's.
	ownerEnded := ""
	if t.Ref.IsChild() {
		if ownerEnded, err = relations.TargetEnded(ctx, r.Client, namespace, t.Ref); err != nil {
			return o, err
		}
		o.obs.ChildOwner = cmp.Or(ownerEnded, account.OwnerRunning)
	}
	if job == nil {
		if !t.Ref.IsChild() {
			o.deletedJob = r.deletedJobs.get(namespace, t.Ref.Job, r.now())
			o.obs.DeletedJob = jobkind.Facts(o.deletedJob)
			if o.obs.ChildOwner, err = r.ownerOfJob(ctx, namespace, o.deletedJob); err != nil {
				return o, err
			}
		}
		o.obs.OwnerEnded = ownerEnded
		if results {
			o.pods, err = relations.TargetPods(ctx, r.Client, namespace, t.Ref)
		}
		return o, err
	}
	o.job, o.obs.Job = job, jobkind.Facts(job)
	o.obs.RestartAttempt = attempt
	if !t.Ref.IsChild() {
		if o.obs.ChildOwner, err = r.ownerOfJob(ctx, namespace, job); err != nil {
			return o, err
		}
	}
	if multikueue.Dispatched(job) {
		// Its pods run on a MultiKueue worker: none is here to list (PodsListed stays
		// false, so no completed index counts as a result lost), and its coverage is the
		// status Kueue copies from the worker's Job.
		return o, r.observeWorkload(ctx, &o, t.Ref, job, results)
	}
	// The pods are only read: listing them without a deep copy saves a copy of every pod
	// of the Job on every reconcile (the largest cost in the load benchmark's profile).
	ofJob := client.MatchingFields{relations.IndexOwnerUID: string(job.UID)}
	var pods corev1.PodList
	scope := job.Spec.Template.Labels[v1alpha1.LabelScope]
	// The coverage scope's cache holds only its pods' metadata: enough to count attempts,
	// not to read a result.
	metadataOnly := scope == v1alpha1.ScopeCoverage && r.CoveragePods != nil
	switch {
	case metadataOnly && !results:
		list := relations.PodMetadataList()
		if err := r.CoveragePods.List(ctx, list, client.InNamespace(namespace), ofJob, client.UnsafeDisableDeepCopy); err != nil {
			return o, err
		}
		pods.Items = relations.SucceededPods(list.Items)
	case scope != "" && !metadataOnly || r.APIReader == nil:
		// Every identity's pods: a superseded identity's succeeded pods are still held
		// for their results (SuccessfulAttempts counts only the Job's own).
		if pods.Items, err = relations.TargetPods(ctx, r.Client, namespace, t.Ref); err != nil {
			return o, err
		}
		if scope == v1alpha1.ScopeResults {
			if pods.Items, err = r.withEarlierScope(ctx, namespace, job, pods.Items, results); err != nil {
				return o, err
			}
		}
	default:
		// No cache holds what the account reads of these pods: the Job started before its
		// account existed (outside the opt-in scope), or the account started requiring
		// results while its Job ran in the coverage scope. Only succeeded pods count
		// (attempts, results), so only those are read: from the Job's own cache of
		// succeeded pods (LatePods), or without one (tests) straight from the API server.
		read := r.succeededPodsLive
		if r.LatePods != nil {
			read = r.LatePods.SucceededPods
		}
		if pods.Items, err = read(ctx, job); err != nil {
			return o, err
		}
		if results {
			// Those read hold only this Job's pods; the pods of the target's earlier
			// identities that ran in the results scope are held for their results all
			// the same (relations.CapturedBy), and the manager's cache holds them.
			if pods.Items, err = r.withEarlierIdentities(ctx, namespace, t.Ref, job, pods.Items); err != nil {
				return o, err
			}
		}
	}
	o.pods = pods.Items
	o.obs.PodsListed = true
	o.obs.SuccessfulPods = relations.SuccessfulAttempts(job, pods.Items)
	if results {
		// A pod batchledger did not see the Job controller create reports nothing: its
		// index's result is missing once the Job ends, not pending.
		// Without the key (captureResults says so) only marked pods count as reporting.
		legacyBefore, _ := r.ledger().LegacyPodsBefore(ctx, r.now())
		byUID := make(map[types.UID]*corev1.Pod, len(pods.Items))
		for i := range pods.Items {
			byUID[pods.Items[i].UID] = &pods.Items[i]
		}
		for i := range o.obs.SuccessfulPods {
			a := &o.obs.SuccessfulPods[i]
			a.NoResult = !relations.ReportsResult(byUID[a.UID], legacyBefore)
		}
		o.obs.Unfinished = unfinishedIndexes(job, pods.Items, legacyBefore)
	}
	return o, r.observeWorkload(ctx, &o, t.Ref, job, results)
}

// unfinishedIndexes are the completion indexes of job's pods among pods (relations.IndexOf)
// that have not finished, are held for their result and report one
// (relations.ReportsResult, given legacyBefore): the Job's status may count such a pod's
// success before the pod cache shows it, and its result is still to be captured. A pod
// the releaser let go (MaxHold after its deletion: its kubelet is silent) is waited for
// no more.
func unfinishedIndexes(job *batchv1.Job, pods []corev1.Pod, legacyBefore time.Time) []int {
	var out []int
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !held(p) {
			continue
		}
		if idx, ok := relations.IndexOf(p, job); ok && relations.ReportsResult(p, legacyBefore) {
			out = append(out, idx)
		}
	}
	return out
}

// withEarlierScope appends to pods, the pods of job the manager's cache holds (those of
// the results scope), job's succeeded pods of the coverage scope: a Job Kueue preempted
// after pods of it ran has its template raised to the results scope when an account
// requiring results comes, so that its later pods are held for their results, while
// the pods that ran before keep the scope of their creation and only the cache of
// succeeded coverage pods sees them. They are read as a coverage Job's are for such an
// account (LatePods), and only when that cache holds one. An account that does not
// require results counts them from that cache's metadata, as it does a coverage Job's
// (their successes and attempts are the Job's whatever its template says now). The
// result is a new slice.
func (r *Reconciler) withEarlierScope(ctx context.Context, namespace string, job *batchv1.Job, pods []corev1.Pod, results bool) ([]corev1.Pod, error) {
	if r.CoveragePods == nil || results && r.APIReader == nil && r.LatePods == nil {
		return pods, nil
	}
	list := relations.PodMetadataList()
	if err := r.CoveragePods.List(ctx, list, client.InNamespace(namespace),
		client.MatchingFields{relations.IndexOwnerUID: string(job.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return pods, nil
	}
	earlier := relations.SucceededPods(list.Items)
	if results {
		read := r.succeededPodsLive
		if r.LatePods != nil {
			read = r.LatePods.SucceededPods
		}
		var err error
		if earlier, err = read(ctx, job); err != nil {
			return nil, err
		}
	}
	have := make(map[types.UID]bool, len(pods))
	for i := range pods {
		have[pods[i].UID] = true
	}
	out := slices.Clip(pods)
	for i := range earlier {
		if !have[earlier[i].UID] {
			out = append(out, earlier[i])
		}
	}
	return out, nil
}

// withEarlierIdentities appends to pods, the pods of job read outside the manager's cache,
// the target's index pods of its other identities that the manager's cache holds (those
// of the results scope), so that result capture records every pod the releaser holds.
// The result is a new slice: pods may be a cache's own.
func (r *Reconciler) withEarlierIdentities(ctx context.Context, namespace string, ref v1alpha1.TargetRef, job *batchv1.Job, pods []corev1.Pod) ([]corev1.Pod, error) {
	cached, err := relations.TargetPods(ctx, r.Client, namespace, ref)
	if err != nil {
		return nil, err
	}
	out := slices.Clip(pods)
	for i := range cached {
		if owner := relations.IndexPodJob(&cached[i]); owner != nil && owner.UID != job.UID {
			out = append(out, cached[i])
		}
	}
	return out, nil
}

// ownerOfJob is, for a Job a Job target names (by its name), how the owner that may
// restart it stands when it is a child Job (of a JobSet, of the JobSet a TrainJob
// renders): account.OwnerRunning while an owner may still restart it, else how the owner
// ended; "" for a Job of no such owner, or nil. A restart recreates every child, the
// Complete ones too, under the same names as new identities: the account waits for the
// owner of a child named by its Job name as for one named as the child
// (account.Observation.ChildOwner).
func (r *Reconciler) ownerOfJob(ctx context.Context, namespace string, job *batchv1.Job) (string, error) {
	if job == nil {
		return "", nil
	}
	state := ""
	for _, ref := range relations.JobTargets(job) {
		if !ref.IsChild() || !relations.NamesJob(ref, job) {
			continue
		}
		if _, unserved := unservedAPI(r.APIs, ref); unserved {
			continue
		}
		ended, err := relations.TargetEnded(ctx, r.Client, namespace, ref)
		if err != nil {
			return "", err
		}
		if ended == "" {
			return account.OwnerRunning, nil
		}
		state = cmp.Or(state, ended)
	}
	return state, nil
}

// observeWorkload reads the Workload job, which ref resolved to, runs under into o: from
// the cache, or, when the cache does not hold it (it lacks the scope label), from the API
// server, labelling it with the scope of the account (results: one requiring results).
func (r *Reconciler) observeWorkload(ctx context.Context, o *observed, ref v1alpha1.TargetRef, job *batchv1.Job, results bool) error {
	if !r.APIs.Served(APIWorkload) {
		return nil // no Kueue: no Workload to read
	}
	wl, err := relations.WorkloadOfTarget(ctx, r.Client, ref, job)
	if err == nil && wl == nil {
		wl, err = r.workloadLive(ctx, ref, job, relations.ScopeFor(results))
	}
	if err != nil {
		return err
	}
	if wl != nil {
		o.workload = wl
		o.obs.Workload = workloadObservation(wl)
	}
	return nil
}

// livePodsPage is how many pods one request of succeededPodsLive returns: a Job of
// thousands of completions is read in pages, never in one response held whole by the
// API server.
const livePodsPage = 500

// succeededPodsLive lists a Job's succeeded pods from the API server, page by page: the
// reconciler's read without LatePods.
func (r *Reconciler) succeededPodsLive(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	namespace := job.Namespace
	selector, err := relations.JobPodSelector(job)
	if err != nil {
		return nil, err
	}
	var all []corev1.Pod
	opts := []client.ListOption{client.InNamespace(namespace),
		client.MatchingLabelsSelector{Selector: selector},
		client.MatchingFieldsSelector{Selector: succeededSelector()},
		client.Limit(livePodsPage)}
	for cont := ""; ; {
		var page corev1.PodList
		if err := r.APIReader.List(ctx, &page, append(opts, client.Continue(cont))...); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if cont = page.Continue; cont == "" {
			return all, nil
		}
	}
}

// workloadObservation reads admission, eviction and finish from a Kueue Workload.
func workloadObservation(wl *kueue.Workload) *v1alpha1.WorkloadObservation {
	w := &v1alpha1.WorkloadObservation{
		Name:                    wl.Name,
		UID:                     wl.UID,
		Admitted:                apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted),
		Evicted:                 apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted),
		Finished:                apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished),
		Cluster:                 multikueue.Cluster(wl),
		NominatedClusters:       multikueue.Nominated(wl),
		ObservedResourceVersion: wl.ResourceVersion,
	}
	if ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue {
		w.EvictionReason = ev.Reason
	}
	if adm := wl.Status.Admission; adm != nil {
		w.ClusterQueue = string(adm.ClusterQueue)
		for _, ps := range adm.PodSetAssignments {
			res := make([]string, 0, len(ps.Flavors))
			for name := range ps.Flavors {
				res = append(res, string(name))
			}
			slices.Sort(res)
			for _, name := range res {
				w.Flavors = append(w.Flavors, fmt.Sprintf("%s=%s:%s", ps.Name, name, ps.Flavors[corev1.ResourceName(name)]))
			}
		}
	}
	return w
}
