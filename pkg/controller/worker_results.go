package controller

import (
	"context"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/all"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/multikueue"
	"batchledger.dev/batchledger/pkg/relations"
)

// WorkerResults are the results the worker role of MultiKueue worker clusters recorded,
// as the manager reads them (pkg/multikueue/workers).
type WorkerResults interface {
	// Records are the WorkerResults worker holds of the manager Workload
	// namespace/workload, and what is known of the worker.
	Records(ctx context.Context, worker, namespace, workload string) ([]v1alpha1.WorkerResult, multikueue.WorkerState, error)
	// Jobs are the WorkerJobs worker holds of the manager Workload namespace/workload:
	// the child Jobs of a JobSet dispatched there.
	Jobs(ctx context.Context, worker, namespace, workload string) ([]v1alpha1.WorkerJob, multikueue.WorkerState, error)
	// Events carry each WorkerResult and WorkerJob a worker recorded, to wake its
	// accounts.
	Events() <-chan event.GenericEvent
}

// WorkerRecheck is how often an account whose results are pending on a worker cluster
// is looked at again: a worker's reachability is probed, not watched.
const WorkerRecheck = 30 * time.Second

// resultSource is a succeeded pod whose result an account records: a pod of this
// cluster, or the pod a worker's WorkerResult records (cluster names the worker).
type resultSource struct {
	pod     *corev1.Pod
	jobUID  types.UID
	index   int
	cluster string
}

// workerAdmissions are the (worker, Workload) pairs whose records a dispatched target
// accepts: its admissions the account recorded (status.targets[].admissions[]) under its
// identity uid, and the Workload wl observed now. With uid "" (a dispatched JobSet
// child, whose identities change with each worker and restart while its Workload
// stays) only the admissions of wl count: Kueue names an owner's Workload after the
// owner's UID, so a Workload of another name was an owner of the same name deleted
// before, whose children ran nothing for this one. When wl is unknown, the owner's
// Workload is gone while the owner stays (Kueue's retention deletes a finished Workload,
// objectRetentionPolicies.workloads.afterFinished): the admissions on record since
// ownerCreated, the owner's creation, are its own (none without it), give or take
// kinds.ClockSkewAllowance (an admission's time is batchledger's clock, the creation the
// API server's). A record naming
// another Workload, or read from a worker the Workload was never admitted to, is not the
// target's.
func workerAdmissions(ba *v1alpha1.BatchAccount, key string, uid types.UID, wl *kueue.Workload, ownerCreated *metav1.Time) [][2]string {
	var out [][2]string
	add := func(cluster, workload string, admitted *metav1.Time) {
		switch {
		case cluster == "" || workload == "":
			return
		case uid == "" && wl != nil && workload != wl.Name:
			return
		case uid == "" && wl == nil && (ownerCreated == nil || admitted == nil || kinds.BeforeBeyondSkew(admitted.Time, ownerCreated.Time)):
			return
		}
		// The latest admission to a worker places it: after A, B and A again, A's
		// records are the newest (kinds.Recorded follows the last worker).
		out = slices.DeleteFunc(out, func(p [2]string) bool { return p == [2]string{cluster, workload} })
		out = append(out, [2]string{cluster, workload})
	}
	for _, ts := range ba.Status.Targets {
		if ts.Name != key || uid != "" && ts.UID != uid {
			continue
		}
		for _, a := range ts.Admissions {
			add(a.Cluster, a.Workload, &a.AdmittedAt)
		}
	}
	if wl != nil {
		add(multikueue.Cluster(wl), wl.Name, nil)
	}
	return out
}

// admissionIdentity is the identity whose admissions a dispatched target's records are
// read from (workerAdmissions): its Job's, any for a JobSet child read from a worker.
func admissionIdentity(o observed) types.UID {
	if o.job == nil || o.recordedOn != "" {
		return ""
	}
	return o.job.UID
}

// workerSources are the results of a dispatched target the workers it was admitted to
// recorded, under the manager's identity (its Job's UID, the record's index); also of a
// dispatched Job deleted since (deletedDispatch), whose results stay on its workers.
func (r *Reconciler) workerSources(ctx context.Context, ba *v1alpha1.BatchAccount, t account.Target, o observed) ([]resultSource, error) {
	if r.WorkerResults == nil {
		return nil, nil
	}
	var name string
	var identity types.UID
	var grace time.Duration
	// A dispatched JobSet's child is the worker's identity: each record names its own.
	fromRecord := o.recordedOn != ""
	switch d, deleted := deletedDispatch(ba, t, o); {
	case multikueue.Dispatched(o.job):
		name, identity = o.job.Name, admissionIdentity(o)
		grace = terminationGrace(o.job.Spec.Template.Spec.TerminationGracePeriodSeconds)
	case deleted:
		name, identity, fromRecord = d.Job, d.UID, t.Ref.IsChild()
		// The Job is gone: its record keeps the grace period. Only batchledger writes the
		// status, and it read the period from a Job's pod template, which Kubernetes lets
		// nobody change: no namespace user can lengthen the bound after the fact.
		grace = terminationGrace(d.TerminationGracePeriodSeconds)
	default:
		return nil, nil
	}
	var out []resultSource
	for _, p := range workerAdmissions(ba, t.Key, identity, o.workload, o.ownerCreated) {
		recs, _, err := r.WorkerResults.Records(ctx, p[0], ba.Namespace, p[1])
		if err != nil {
			return nil, err
		}
		var ended *metav1.Time
		var ranBefore map[types.UID]bool
		if !fromRecord {
			ended = admissionEnded(ba, t.Key, identity, p, o.workload)
			ranBefore = copiesRunningBefore(recs, ended)
		}
		for i := range recs {
			if recs[i].Job != name || !fromRecord && (finishedBeforeCreated(&recs[i], o.job) || finishedAfter(&recs[i], ended, grace) ||
				madeAfterItsEnd(&recs[i], ended, ranBefore)) {
				continue
			}
			// A Job dispatched itself is the manager's identity; a dispatched JobSet's
			// child is the worker's (the Job the record's pod ran in).
			uid := identity
			if fromRecord {
				if uid = recs[i].JobUID; uid == "" {
					continue
				}
			}
			out = append(out, resultSource{pod: multikueue.RecordPod(&recs[i]), jobUID: uid, index: int(recs[i].Index), cluster: p[0]})
		}
	}
	return out, nil
}

// finishedBeforeCreated reports whether rec's pod finished, and rec was written, before
// job, the manager's dispatched Job, was created (give or take kinds.ClockSkewAllowance:
// the record's times are the worker's clocks, the creation the manager's). Such a pod
// ran for an earlier Job of its name whose Workload had the same name (a prebuilt
// Workload, kueue.x-k8s.io/prebuilt-workload-name, named again for the next run): the
// worker keeps its records for their retention, and they are no result of job's
// identity. The record's creation, the worker API server's clock, is asked too: the
// pod's end is its node's clock, which may lag.
func finishedBeforeCreated(rec *v1alpha1.WorkerResult, job *batchv1.Job) bool {
	if job == nil {
		return false // deleted: its creation is not on record
	}
	created := job.CreationTimestamp
	before := func(t metav1.Time) bool { return kinds.BeforeBeyondSkew(t.Time, created.Time) }
	return !created.IsZero() && before(rec.FinishedAt) && (rec.CreationTimestamp.IsZero() || before(rec.CreationTimestamp))
}

// copiesRunningBefore are the worker Jobs (their UIDs, as the worker reports them) of
// which recs hold a pod that finished before ended, the end of the admission on recs'
// worker: copies that ran during the admission. nil when it has not ended.
func copiesRunningBefore(recs []v1alpha1.WorkerResult, ended *metav1.Time) map[types.UID]bool {
	if ended == nil {
		return nil
	}
	out := map[types.UID]bool{}
	for i := range recs {
		if recs[i].FinishedAt.Before(ended) {
			out[recs[i].JobUID] = true
		}
	}
	return out
}

// madeAfterItsEnd reports whether rec's pod finished after ended, the end of the
// admission on rec's worker (within its pods' termination grace period and
// kinds.ClockSkewAllowance: finishedAfter takes the later ones), in a Job of which no
// pod finished before (ranBefore). A Job of the copy's name can be made there only once
// Kueue deleted the copy at the eviction: its pods all finish after the end, so it is a
// namespace user's, not the copy. The copy's pods ending in their termination count when
// another pod of it finished during the admission; when none did, the next worker runs
// every index again and records its own results. A record naming no Job UID (of an
// earlier worker role) is taken as before.
func madeAfterItsEnd(rec *v1alpha1.WorkerResult, ended *metav1.Time, ranBefore map[types.UID]bool) bool {
	return ended != nil && rec.JobUID != "" && !ranBefore[rec.JobUID] && !rec.FinishedAt.Before(ended)
}

// admissionEnded is when the identity uid of target key last ran on worker at[0] under
// the Workload at[1]: the end of its latest admission there as the account recorded it
// (EvictedAt, first observed), or, when the account has not seen it end yet (the
// Workload moved while the controller was down), the admission of wl, the Workload now,
// on another worker, which came after it. nil while it may still run there: wl is on
// that worker, or that admission was not seen to end and wl runs on no other worker; nil
// too when the account left admissions out for size (the latest there may be one of
// them).
func admissionEnded(ba *v1alpha1.BatchAccount, key string, uid types.UID, at [2]string, wl *kueue.Workload) *metav1.Time {
	var next *metav1.Time
	if wl != nil {
		if multikueue.Cluster(wl) == at[0] && wl.Name == at[1] {
			return nil
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); multikueue.Cluster(wl) != "" && c != nil && c.Status == metav1.ConditionTrue {
			next = &c.LastTransitionTime
		}
	}
	for _, ts := range ba.Status.Targets {
		if ts.Name != key || ts.UID != uid || ts.AdmissionsDropped > 0 {
			continue
		}
		for i := len(ts.Admissions) - 1; i >= 0; i-- {
			if a := &ts.Admissions[i]; a.Cluster == at[0] && a.Workload == at[1] {
				if end := a.EvictedAt; end != nil && (next == nil || !next.Before(end)) {
					return end
				}
				return next
			}
		}
	}
	return nil
}

// finishedAfter reports whether rec's pod finished, and rec was written, after ended,
// the end of the admission on rec's worker, and grace, its pods' termination grace
// period, more (give or take kinds.ClockSkewAllowance: the record's times are the
// worker's clocks, ended the manager's). A pod ending within its grace period was
// running when MultiKueue took the Workload away, and its result is the identity's as on
// one cluster; one ending later ran after that (a Job of the copy's name and marks a
// namespace user made there once Kueue deleted the copy): its index, run again on the
// next worker, is that copy's, and so is its result. The record's creation, the worker
// API server's clock, is asked too: the pod's end is its node's clock, which may run
// ahead.
func finishedAfter(rec *v1alpha1.WorkerResult, ended *metav1.Time, grace time.Duration) bool {
	if ended == nil {
		return false
	}
	bound := ended.Add(kinds.ClockSkewAllowance + grace)
	return rec.FinishedAt.After(bound) && (rec.CreationTimestamp.IsZero() || rec.CreationTimestamp.After(bound))
}

// observeWorker finds a dispatched JobSet child in the workers' records
// (observeDispatchedChild), and tells the account of a dispatched target where its
// results are read from (account.Observation.ResultsOnWorker, WorkerProblem). A worker the manager has no
// kubeconfig for (never given, or its Secret deleted) can report none of the results
// recorded there: once the Job terminated they count as lost (PodsListed), as the
// results of a terminated Job without pods do on one cluster.
func (r *Reconciler) observeWorker(ctx context.Context, ba *v1alpha1.BatchAccount, t account.Target, o *observed) error {
	namespace := ba.Namespace
	if o.job == nil {
		if err := r.observeDispatchedChild(ctx, ba, t, o); err != nil {
			return err
		}
	}
	if d, deleted := deletedDispatch(ba, t, *o); deleted && r.WorkerResults != nil && ba.Spec.RequiresResults() {
		// Its Job (or its child's owner) is gone from this cluster (ttlSecondsAfterFinished,
		// a cleanup: the record finalizer waits for a Job's end only), its results are
		// not: they are read from the worker of its last admission as while it existed.
		o.obs.ResultsOnWorker = true
		if d.PodScope != v1alpha1.ScopeResults {
			o.obs.WorkerProblem, o.obs.PodsListed = unstampedCopy, true
			return nil
		}
		_, state, err := r.WorkerResults.Records(ctx, d.cluster, namespace, d.workload)
		if err != nil {
			return err
		}
		o.obs.WorkerProblem, o.obs.PodsListed = state.Problem(d.cluster), !state.Configured
		return nil
	}
	if r.WorkerResults == nil || !multikueue.Dispatched(o.job) {
		return nil
	}
	cluster, workload := o.retainedOn[0], o.retainedOn[1]
	switch {
	case o.workload != nil:
		cluster, workload = multikueue.Cluster(o.workload), o.workload.Name
	case cluster == "":
		// Its Workload is gone (Kueue's retention of a finished one, a cleanup): the
		// worker is the one of the admission of this identity on record, as for a Job
		// deleted (deletedDispatch).
		cluster, workload = admittedOn(ba, t.Key, o.job.UID)
		if cluster == "" && jobTerminal(o.job) != "" {
			// None on record (the account came, or the controller was back, after the
			// Workload was gone): a worker's records count only for a Workload admitted
			// there, so none can be read, and the Job, terminated, gets no new Workload.
			// Its results are lost (MissingResult, for repair to re-run) rather than
			// pending forever; those recorded before stay.
			o.obs.ResultsOnWorker, o.obs.WorkerProblem, o.obs.PodsListed = true, unknownWorker, true
			return nil
		}
	}
	if cluster == "" {
		// Not dispatched yet, or a Job still running whose Workload Kueue creates again.
		return nil
	}
	o.obs.ResultsOnWorker = true
	if ba.Spec.RequiresResults() && o.job.Spec.Template.Labels[v1alpha1.LabelScope] != v1alpha1.ScopeResults {
		// MultiKueue copied the Job before its template was stamped (it was dispatched
		// before an account required its results): the copy's pods are not held on the
		// worker, whose role records no result of them. Once the Job terminated its
		// results count as lost, as a late Job's do on one cluster once its pods are gone.
		// So for a dispatched JobSet's child, whose record keeps its pod template's scope
		// on the worker (the JobSet was copied in the coverage scope).
		o.obs.WorkerProblem = unstampedCopy
		o.obs.PodsListed = true
		return nil
	}
	_, state, err := r.WorkerResults.Records(ctx, cluster, namespace, workload)
	if err != nil {
		return err
	}
	o.obs.WorkerProblem = state.Problem(cluster)
	o.obs.PodsListed = !state.Configured
	return nil
}

// recordedDispatch is the identity of a Job target the account's status holds, with the
// worker and Workload of its last admission there (the Workload as last observed when
// its admissions were left out).
type recordedDispatch struct {
	*v1alpha1.TargetStatus
	cluster, workload string
}

// deletedDispatch is, for a Job target whose Job is no longer on this cluster (o.job
// nil), or a child target whose dispatched owner is gone (its Workload with it), the
// identity on its record when MultiKueue ran it on a worker cluster: the record stands
// for it (a deleted identity), and the results its worker recorded are that identity's.
// false for any other target.
func deletedDispatch(ba *v1alpha1.BatchAccount, t account.Target, o observed) (recordedDispatch, bool) {
	if o.job != nil || t.Ref.IsChild() && o.obs.OwnerEnded != account.OwnerDeleted {
		return recordedDispatch{}, false
	}
	i := slices.IndexFunc(ba.Status.Targets, func(s v1alpha1.TargetStatus) bool { return s.Name == t.Key })
	if i < 0 || ba.Status.Targets[i].UID == "" {
		return recordedDispatch{}, false
	}
	s := &ba.Status.Targets[i]
	d := recordedDispatch{TargetStatus: s}
	d.cluster, d.workload = lastAdmission(s)
	return d, d.cluster != "" && d.workload != ""
}

// lastAdmission is the worker and the Workload name of the last admission s records
// (the Workload as last observed when its admissions were left out); "" when it
// records none on a worker.
func lastAdmission(s *v1alpha1.TargetStatus) (cluster, workload string) {
	cluster = observedCluster(s)
	if n := len(s.Admissions); n > 0 && s.Admissions[n-1].Cluster == cluster {
		workload = s.Admissions[n-1].Workload
	} else if s.Workload != nil {
		workload = s.Workload.Name
	}
	if workload == "" {
		return "", ""
	}
	return cluster, workload
}

// admittedOn is lastAdmission of target key's status when it is of the identity uid;
// "" when the account recorded none of it.
func admittedOn(ba *v1alpha1.BatchAccount, key string, uid types.UID) (cluster, workload string) {
	i := slices.IndexFunc(ba.Status.Targets, func(s v1alpha1.TargetStatus) bool { return s.Name == key })
	if i < 0 || ba.Status.Targets[i].UID != uid {
		return "", ""
	}
	return lastAdmission(&ba.Status.Targets[i])
}

// unstampedCopy is the worker problem of a dispatched Job whose template does not carry
// the results scope: its copy on the worker does not either.
const unstampedCopy = "its copy there was made before an account required its results, so its pods are not held there and no result of them is recorded"

// unknownWorker is the worker problem of a terminated dispatched Job whose Workload is
// gone with no admission on record: no worker's records can be taken for its results.
const unknownWorker = "its Workload was deleted before batchledger observed which MultiKueue worker cluster admitted it, so no result recorded on a worker can be read as this Job's"

// observeDispatchedChild observes a child target of a JobSet (or TrainJob) MultiKueue
// dispatched, which has no Job on the manager: from the WorkerJobs of the workers its
// Workload was admitted to (workerAdmissions), as a Job dispatched by MultiKueue under
// the worker Job's identity (multikueue.RecordJob), with the worker as its provenance
// (recordedOn). A record counts only if it names the owner's current Workload and was
// read from a worker that Workload was admitted to. Nothing changes when none is found,
// but for a worker whose records are not read now: the child the account last observed
// there stands as observed (lastObserved).
func (r *Reconciler) observeDispatchedChild(ctx context.Context, ba *v1alpha1.BatchAccount, t account.Target, o *observed) error {
	k, ok := relations.KindOf(t.Ref).(kinds.Dispatcher)
	if !ok || !t.Ref.IsChild() || o.obs.APINotServed != "" {
		return nil
	}
	ownerObj, err := k.DispatchedOwner(ctx, r.Client, ba.Namespace, t.Ref)
	if err != nil || ownerObj == nil {
		return err
	}
	owner := metav1.NewControllerRef(ownerObj, k.Object())
	// The Workload belongs to the owner (Kind.WorkloadOwner reads it from the Job's
	// controller): looked for with a Job the owner controls.
	var d observed
	stub := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ba.Namespace, OwnerReferences: []metav1.OwnerReference{*owner}}}
	if err := r.observeWorkload(ctx, &d, t.Ref, stub, ba.Spec.RequiresResults()); err != nil {
		return err
	}
	var ownerCreated *metav1.Time
	ownerEnded, ownerFinished := k.FinishedAt(ownerObj)
	if d.workload == nil && ownerFinished {
		// Its Workload is gone, the owner is not: the admissions on record since the owner
		// was created still say where its children ran (workerAdmissions). Kueue's
		// retention deletes only a finished owner's Workload, while an owner created again
		// under the name has run nothing until Kueue creates and admits its own.
		created := ownerObj.GetCreationTimestamp()
		ownerCreated = &created
	}
	superseded := supersededIdentities(ba, t.Key, d.workload)
	var recs []kinds.RecordedJob
	// unread are the workers whose records are not read now: what the manager holds of
	// one it read before and cannot reach is as it last read it.
	unread := map[string]bool{}
	admitted := workerAdmissions(ba, t.Key, "", d.workload, ownerCreated)
	for _, p := range admitted {
		if r.WorkerResults == nil {
			break
		}
		got, state, err := r.WorkerResults.Jobs(ctx, p[0], ba.Namespace, p[1])
		if err != nil {
			return err
		}
		unread[p[0]] = state.Problem(p[0]) != ""
		for i := range got {
			// A copy's child the account superseded is gone (Kueue deleted that copy, or
			// a restart did): back on its worker before the new copy's children are
			// recorded, its record must not make it the current attempt again.
			if !superseded[got[i].JobUID] && !createdAfterItsOwnerEnded(&got[i], ownerEnded, ownerFinished) &&
				!createdBefore(&got[i], ownerObj.GetCreationTimestamp().Time) {
				recs = append(recs, kinds.RecordedJob{Record: &got[i], Cluster: p[0]})
			}
		}
	}
	// The worker the owner runs on: its Workload's, or with the Workload gone, its
	// newest admission's on record.
	var last [2]string
	if d.workload != nil {
		last = [2]string{multikueue.Cluster(d.workload), d.workload.Name}
	} else if n := len(admitted); n > 0 {
		last = admitted[n-1]
	}
	admittedNow := currentAdmission(d.workload, last[0])
	rec := kinds.Recorded(k, t.Ref, recs)
	if rec != nil && unread[rec.Cluster] && createdBefore(rec.Record, ptr.Deref(admittedNow, metav1.Time{}).Time) {
		// As the manager last read a worker it cannot reach now, of a copy the Workload's
		// current admission replaced (Kueue deleted it at the eviction): no child of the
		// run going on there.
		rec = nil
	}
	if rec != nil && last[0] != "" && rec.Cluster != last[0] {
		// The record is of a copy on a worker the Workload ran on before: Kueue deleted
		// that copy when it dispatched the Workload to last[0], whose copy runs the child
		// again. While last[0]'s records are not read, nothing says what its child did:
		// the target waits on it (unreadWorker), as when no worker is read, rather than
		// stand for that run with the old copy's child (and its end, the JobSet's).
		if unread[last[0]] {
			rec = nil
		}
	}
	// A record of a worker not read now (not reachable) is as the manager last read it:
	// no news of the child, which may have completed there since (as lastObserved).
	read := rec != nil && !unread[rec.Cluster]
	if rec == nil {
		if err := r.unreadWorker(ctx, ba.Namespace, last, d.workload, o); err != nil || o.obs.WorkerProblem == "" {
			return err
		}
		if d.workload != nil && !account.Follows(ba, account.RunRef{WorkloadUID: d.workload.UID, WorkloadName: d.workload.Name}) {
			// An Accepted account follows only the Workloads on its record: the owner's
			// Workload now is another run's (the owner created again under its name),
			// and the record's identity is no child of it.
			return nil
		}
		// The worker's records are not read now (the manager restarted, its kubeconfig
		// is gone): that is no news of the child, and no restart superseded it. The
		// identity the account last observed stands as it was observed.
		var replaced bool
		if rec, replaced = lastObserved(ba, t, last[0], admittedNow); rec == nil {
			o.obs.Redispatched = replaced
			return nil
		}
	}
	job := multikueue.RecordJob(rec.Record, owner)
	o.job, o.obs.Job, o.obs.RestartAttempt = job, jobkind.Facts(job), rec.Record.RestartAttempt
	o.recordedOn, o.ownerCreated = rec.Cluster, ownerCreated
	if d.workload == nil {
		o.retainedOn = last
	}
	// The owner's end does not end a target found: its Job's terminal condition does.
	o.obs.OwnerEnded = ""
	o.workload, o.obs.Workload = d.workload, d.obs.Workload
	if ended := o.obs.ChildOwner; read && rec.Record.Terminal == "" && ended != "" && ended != account.OwnerRunning {
		// A JobSet that ended deletes its running children, and Kueue the worker's
		// JobSet: the record cannot say so and outlives the Job, so the child is taken
		// for what it is, a Job deleted before it terminated (its last state the
		// record's). Not so of the identity last observed while the worker is unread:
		// it may have completed there since. o.job stays, so that its results are still
		// read from the worker.
		o.obs.Job, o.obs.DeletedJob, o.obs.OwnerEnded = nil, o.obs.Job, ended
	}
	return nil
}

// createdAfterItsOwnerEnded reports whether rec records a Job created after its owner
// ended (at ended, when finished; give or take kinds.ClockSkewAllowance): a JobSet that
// ended creates no child, while a worker's namespace editor may make a Job of a child's
// name, labels and owner once the child is gone, which the worker role records. MultiKueue
// copies the owner's status from the worker, so both times are the worker's clock's.
func createdAfterItsOwnerEnded(rec *v1alpha1.WorkerJob, ended time.Time, finished bool) bool {
	return finished && rec.JobCreated != nil && kinds.AfterBeyondSkew(rec.JobCreated.Time, ended)
}

// createdBefore reports whether rec records a Job created before t (zero: never), give or
// take kinds.ClockSkewAllowance: the record's time is the worker's clock, t the
// manager's. Before the manager's owner was created, the Job is a child of an earlier
// owner of its name whose Workload had the same name (a prebuilt Workload,
// kueue.x-k8s.io/prebuilt-workload-name, named again for the next run), which the worker
// keeps for its retention and which ran nothing for this owner; before the Workload's
// current admission began, it is a child of a copy an earlier admission made.
func createdBefore(rec *v1alpha1.WorkerJob, t time.Time) bool {
	return !t.IsZero() && rec.JobCreated != nil && kinds.BeforeBeyondSkew(rec.JobCreated.Time, t)
}

// terminationGrace is how long the pods of the manager's Job may take to stop once
// deleted: seconds, its template's termination grace period (as the Job has it, or as
// the target's status recorded it once the Job is gone), Kubernetes' default when nil.
func terminationGrace(seconds *int64) time.Duration {
	return time.Duration(ptr.Deref(seconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
}

// supersededIdentities are the Job UIDs of target key's history, but for the identity its
// status holds now: an identity once superseded never comes back (one pushed into history
// by an earlier version while its worker was unread, and observed again since, is the
// current one). Nor for the one superseded last while the status holds none, when that
// happened during wl's current admission: no identity replaced it and its copy still
// runs, so its record only went missing for a while (the worker role's retention deleted
// it while the Job ran, and writes it again on the Job's next change).
func supersededIdentities(ba *v1alpha1.BatchAccount, key string, wl *kueue.Workload) map[types.UID]bool {
	out := map[types.UID]bool{}
	var last *v1alpha1.SupersededIdentity
	for i, h := range ba.Status.History {
		if h.Target == key {
			out[h.UID] = true
			last = &ba.Status.History[i]
		}
	}
	current := types.UID("")
	for _, s := range ba.Status.Targets {
		if s.Name == key {
			current = s.UID
		}
	}
	switch {
	case current != "":
		delete(out, current)
	case last != nil && supersededDuringAdmission(last, wl):
		delete(out, last.UID)
	}
	return out
}

// supersededDuringAdmission reports whether h was superseded while wl's current
// admission ran (since its Admitted condition turned True).
func supersededDuringAdmission(h *v1alpha1.SupersededIdentity, wl *kueue.Workload) bool {
	if wl == nil {
		return false
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
	return c != nil && c.Status == metav1.ConditionTrue && !h.SupersededAt.Before(&c.LastTransitionTime)
}

// lastObserved is the record of the child Job the account's status last observed for a
// dispatched target t, on worker cluster: its status as a WorkerJob (multikueue.RecordJob
// makes the Job back). nil when the status holds no such identity, holds it as deleted,
// or left its completed indexes out for size, or the Job has a successPolicy (neither
// can be made back: the status holds the policy in words). Failed indexes
// left out for size are not made back either: the record gives none, and the account
// keeps them left out rather than read as none. nil too when the copy that ran the
// identity is gone (replacedCopy: the Workload now runs on another worker than the one
// the status last saw the identity on, or was admitted again since): the child to come
// in the new copy is another identity; the old one is superseded, as it is once the
// worker is read; replaced says so then.
func lastObserved(ba *v1alpha1.BatchAccount, t account.Target, cluster string, admittedNow *metav1.Time) (rec *kinds.RecordedJob, replaced bool) {
	i := slices.IndexFunc(ba.Status.Targets, func(s v1alpha1.TargetStatus) bool { return s.Name == t.Key })
	if i < 0 || ba.Status.Targets[i].UID == "" {
		return nil, false
	}
	s := &ba.Status.Targets[i]
	if replacedCopy(s, cluster, admittedNow) {
		return nil, true
	}
	if s.Deleted || !s.Found || s.CompletedIndexesOmitted || s.SuccessPolicy != "" {
		return nil, false
	}
	job := &v1alpha1.WorkerJob{
		ObjectMeta: metav1.ObjectMeta{Name: string(s.UID), Namespace: ba.Namespace, ResourceVersion: s.ObservedResourceVersion},
		JobSet:     t.Ref.Owner(), TrainJob: t.Ref.TrainJob, ReplicatedJob: t.Ref.ReplicatedJob, JobIndex: t.Ref.Index(),
		RestartAttempt: s.RestartAttempt, Job: s.Job, JobUID: s.UID, Completions: ptr.To(s.Completions), NotIndexed: s.NotIndexed, Scope: s.PodScope,
		Succeeded: s.Succeeded, CompletedIndexes: s.CompletedIndexes,
		Terminal: s.Terminal, TerminalReason: s.TerminalReason, TerminalAt: s.TerminalObservedAt,
	}
	if s.FailedIndexes != "" {
		job.FailedIndexes = ptr.To(s.FailedIndexes)
	}
	return &kinds.RecordedJob{Record: job, Cluster: cluster}, false
}

// replacedCopy reports whether s's identity ran in a worker's copy of its owner that is
// gone now that the Workload runs on cluster under its admission of admittedNow (nil:
// not admitted now): it was last seen running on another worker (Kueue deleted that
// copy when it dispatched the Workload away), or in an admission that ended before the
// current one began (Kueue deletes the copy at an eviction, and the next admission makes
// a new one, on the same worker too): its end was observed, or it was first observed
// before the current admission began (give or take kinds.ClockSkewAllowance: the
// observation is batchledger's clock, the admission Kueue's).
func replacedCopy(s *v1alpha1.TargetStatus, cluster string, admittedNow *metav1.Time) bool {
	if ranOn := observedCluster(s); ranOn != "" && ranOn != cluster {
		return true
	}
	n := len(s.Admissions)
	if admittedNow == nil || n == 0 {
		return false
	}
	last := &s.Admissions[n-1]
	return last.EvictedAt != nil || kinds.BeforeBeyondSkew(last.AdmittedAt.Time, admittedNow.Time)
}

// currentAdmission is when wl's current admission began (its Admitted condition), when
// it runs on worker cluster; nil otherwise.
func currentAdmission(wl *kueue.Workload, cluster string) *metav1.Time {
	if wl == nil || cluster == "" || multikueue.Cluster(wl) != cluster {
		return nil
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return &c.LastTransitionTime
}

// observedCluster is the worker s's identity was last seen running on: its newest
// admission's, else its Workload's as last observed (admissions may all be left out for
// the account's size); "" when the status never saw one.
func observedCluster(s *v1alpha1.TargetStatus) string {
	if n := len(s.Admissions); n > 0 && s.Admissions[n-1].Cluster != "" {
		return s.Admissions[n-1].Cluster
	}
	if s.Workload != nil {
		return s.Workload.Cluster
	}
	return ""
}

// unreadWorker names, on a dispatched target not found, the worker its Workload runs on
// (at: the worker and the Workload's name; wl, nil when Kueue deleted it, as observed)
// when batchledger does not read that worker's records (run without
// --multikueue-worker-results, no kubeconfig, not read yet, not reachable): the target
// waits on it, as a dispatched Job's results do. The owner's end, copied back from the
// worker, says nothing then of a child that may have run there to its end: the target
// is not taken for one never created (OwnerEnded).
func (r *Reconciler) unreadWorker(ctx context.Context, namespace string, at [2]string, wl *kueue.Workload, o *observed) error {
	cluster := at[0]
	if cluster == "" {
		return nil
	}
	problem := noWorkerReader
	if r.WorkerResults != nil {
		_, state, err := r.WorkerResults.Jobs(ctx, cluster, namespace, at[1])
		if err != nil {
			return err
		}
		problem = state.Problem(cluster)
	}
	if problem == "" {
		return nil // read whole: the child is not recorded there
	}
	if wl != nil {
		o.workload, o.obs.Workload = wl, workloadObservation(wl)
	}
	o.obs.ResultsOnWorker, o.obs.WorkerProblem = true, problem
	o.obs.OwnerEnded = ""
	return nil
}

// noWorkerReader is the worker problem of a dispatched JobSet's (or TrainJob's) child on
// a manager that reads no worker: its child Jobs are recorded only there.
const noWorkerReader = "batchledger reads no worker cluster (the manager runs without --multikueue-worker-results), so it cannot see the child Jobs that ran there"

// pendingOnWorker is whether an account's results, or a dispatched child's coverage
// (unreadWorker), wait on a worker cluster: it is looked at again every WorkerRecheck,
// so that its message follows the worker's state.
func pendingOnWorker(ba *v1alpha1.BatchAccount, seen map[string]observed) bool {
	for _, o := range seen {
		// No worker's state changes what an unknown worker means (unknownWorker).
		if o.obs.ResultsOnWorker && o.obs.WorkerProblem != unknownWorker && (ba.Spec.RequiresResults() || unreadChild(o)) {
			return true
		}
	}
	return false
}

// unreadChild reports whether o is a dispatched child waiting on a worker whose records
// are not read (unreadWorker).
func unreadChild(o observed) bool {
	return o.job == nil && o.obs.ResultsOnWorker && o.obs.WorkerProblem != ""
}

// workerResultToAccounts maps a WorkerResult to the live accounts naming its Job, and a
// WorkerJob to those naming the owner whose child it records (its JobSet, its TrainJob:
// kinds.Dispatcher.RecordKey).
func (r *Reconciler) workerResultToAccounts(ctx context.Context, obj client.Object) []reconcile.Request {
	var keys []kinds.IndexKey
	switch rec := obj.(type) {
	case *v1alpha1.WorkerResult:
		keys = append(keys, relations.JobKey(rec.Job))
	case *v1alpha1.WorkerJob:
		keys = all.Kinds.RecordKeys(rec)
	}
	var reqs []reconcile.Request
	for _, key := range keys {
		accounts, err := relations.LiveAccountsNaming(ctx, r.Client, obj.GetNamespace(), key)
		if err != nil {
			return nil
		}
		for _, ba := range accounts {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ba)})
		}
	}
	return reqs
}
