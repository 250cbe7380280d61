package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/relations"
	"batchledger.dev/batchledger/pkg/result"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// Labels and annotations of the driver's own bookkeeping, on pod templates and pods.
const (
	labelBatch = "soak.batchledger.dev/batch"
	// annFate is set with kwok's exit-code annotation: "<attempt>/<result kind>", so a
	// finish whose response was lost (the API server killed mid-request) is adopted.
	annFate = "soak.batchledger.dev/fate"
	// annGraceful marks a pod the driver deletes and then finishes as a worker exiting
	// during its graceful termination.
	annGraceful = "soak.batchledger.dev/graceful"
	// observeFinalizer keeps a pod the driver finished until it has seen the pod's
	// terminal phase. Only TTL-0 Jobs need it: their pods are deleted with the Job the
	// moment it completes, often before the next look, and the oracle counts only pods
	// it saw end.
	observeFinalizer = "soak.batchledger.dev/observe"
	// gracePeriod is the graceful pod's termination grace period: far longer than the
	// driver takes to finish it.
	gracePeriod = 120
	// forgerUser is the user the forger impersonates; forgedPrefix starts the pod UIDs of
	// its results.
	forgerUser   = "soak-forger"
	forgedPrefix = "forged-"
	// editedRule is the rule the rule-edit shape tries: it accepts short results.
	editedRule = "result.records > 0"

	labelJobName       = batchv1.JobNameLabel
	labelControllerUID = batchv1.ControllerUidLabel
	labelRestart       = jobsetkind.LabelRestartAttempt

	inputRevision = "D"
	modelRevision = "m-2026-11"
	resultRule    = "result.valid == result.records && result.records > 0"
	priorityLow   = "soak-low"
	priorityHigh  = "soak-high"
	mainQueue     = "gpu"
	mainFlavor    = "h100"
	preemptFlavor = "a100"
)

// batchRun is the driver's state of one batch.
type batchRun struct {
	plan    *BatchPlan
	phase   string // "", "account", "running", "done", "stuck"
	started time.Time
	ended   time.Time
	gates   map[string]bool
	// preemptorAt is when the high-priority Job was created.
	preemptorAt time.Time
	preempted   bool // eviction seen (false with the gate opened by timeout)
	extraDone   bool
	lowPods     map[int]map[types.UID]bool // ShapePreemption: pods seen per index of the low Job
	note        string

	// accountUIDs are the UIDs of the batch's accounts, by name.
	accountUIDs map[string]types.UID
	// required: requireResults was turned on (ShapeRequireLater).
	required bool
	// ruleTried, ruleAdmitted and ruleRefusal: the rule edit (ShapeRuleEdit).
	ruleTried    bool
	ruleAdmitted int
	ruleRefusal  string
	// The forger's attempts (ShapeForger): when they were made, the forged chunk's name
	// ("" when refused), writes tried and admitted, and a forged result seen counted
	// while the batch ran.
	forgedAt       time.Time
	forgedChunk    string
	forgedTried    int
	forgedAdmitted []string
	forgedSeen     string
	// The namespace's deletion (ShapeNamespaceDelete): begun, pods all ended, gone.
	nsDeletedAt, nsPodsEndedAt, nsGoneAt time.Time
	// killStarted is closed once the leader kill before the last pod began (ShapeTTLZero).
	killStarted chan struct{}
	// releasedEarly are pods released while an account had not recorded their result.
	releasedEarly []string
}

// driver plays users and kubelets: it creates the batches, finishes their pods as planned,
// and records what every pod did.
type driver struct {
	c client.Client
	// jobController acts as Kubernetes' Job controller, to create extra attempts as it
	// would (kwok.AddSucceededAttempt).
	jobController client.Client
	ns            string
	plan          Plan
	cfg           config
	runs          []*batchRun
	byName        map[string]*batchRun // Job or JobSet name prefix (batch name) -> run

	mu        sync.Mutex
	pods      map[types.UID]*PodRecord
	jobs      map[string]*JobRecord
	annotated map[types.UID]bool
	attempts  map[FateKey]int // Attempt 0: how many pods of (job, gen, index) the driver saw end
	errors    int             // API errors the driver retried
	// held marks pods seen carrying the result finalizer; released, those seen held and
	// later without it (each checked once against the accounts' chunks).
	held, released map[types.UID]bool

	// forger is a client acting as forgerUser.
	forger client.Client
	// killLeader kills the batchledger leader now, closing started just before the kill.
	killLeader func(started chan struct{})
}

func newDriver(c client.Client, ns string, plan Plan, cfg config) *driver {
	d := &driver{c: c, ns: ns, plan: plan, cfg: cfg, byName: map[string]*batchRun{},
		pods: map[types.UID]*PodRecord{}, jobs: map[string]*JobRecord{}, annotated: map[types.UID]bool{}, attempts: map[FateKey]int{},
		held: map[types.UID]bool{}, released: map[types.UID]bool{}}
	for i := range plan.Batches {
		r := &batchRun{plan: &plan.Batches[i], gates: map[string]bool{}, lowPods: map[int]map[types.UID]bool{}, accountUIDs: map[string]types.UID{}}
		d.runs = append(d.runs, r)
		d.byName[r.plan.Name] = r
	}
	return d
}

// setup creates the namespace, the priority classes and the queues. It retries, as
// everything the driver does: a component may be down.
func (d *driver) setup(ctx context.Context) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.ns}},
		wrappers.MakeResourceFlavor(mainFlavor).NodeLabel("gpu-type", mainFlavor).Obj(),
		wrappers.MakeResourceFlavor(preemptFlavor).NodeLabel("gpu-type", preemptFlavor).Obj(),
		wrappers.MakeClusterQueue(d.ns + "-gpu").ResourceGroup(wrappers.GPUFlavorQuotas(mainFlavor, "256", "2Ti", "16")).Obj(),
		wrappers.MakeLocalQueue(mainQueue, d.ns).ClusterQueue(d.ns + "-gpu").Obj(),
		wrappers.MakeWorkloadPriorityClass(priorityLow).PriorityValue(10).Obj(),
		wrappers.MakeWorkloadPriorityClass(priorityHigh).PriorityValue(1000).Obj(),
		// The forger: a namespace editor of every batchledger.dev resource and verb.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: forgerUser, Namespace: d.ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: forgerUser, Namespace: d.ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: forgerUser},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: forgerUser}}},
	}
	for _, obj := range objs {
		if err := retry(ctx, 2*time.Minute, func() error { return ignoreExists(d.c.Create(ctx, obj)) }); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// run drives every batch to its end (or its timeout), at most concurrency at once.
func (d *driver) run(ctx context.Context, progress func(string)) {
	next := 0
	lastReport := time.Now()
	for ctx.Err() == nil {
		inFlight := 0
		for _, r := range d.runs {
			if r.phase == "account" || r.phase == "running" {
				inFlight++
			}
		}
		for next < len(d.runs) && inFlight < d.cfg.concurrency {
			d.runs[next].phase = "account"
			d.runs[next].started = time.Now()
			next++
			inFlight++
		}
		if inFlight == 0 && next == len(d.runs) {
			return
		}
		d.tick(ctx)
		if time.Since(lastReport) > 15*time.Second {
			lastReport = time.Now()
			progress(d.progress())
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

func (d *driver) progress() string {
	n := map[string]int{}
	for _, r := range d.runs {
		p := r.phase
		if p == "" {
			p = "waiting"
		}
		n[p]++
	}
	d.mu.Lock()
	pods := len(d.pods)
	d.mu.Unlock()
	return fmt.Sprintf("batches: %d done, %d running, %d starting, %d waiting, %d stuck; %d pods finished", n["done"], n["running"], n["account"], n["waiting"], n["stuck"], pods)
}

// tick observes the namespace once and takes every step that is due.
func (d *driver) tick(ctx context.Context) {
	for _, r := range d.runs {
		if r.phase == "account" {
			d.startBatch(ctx, r)
		}
	}
	// Every namespace of the soak: the main one and the batches' own.
	var podList corev1.PodList
	var jobList batchv1.JobList
	var jsList jobset.JobSetList
	if err := d.c.List(ctx, &podList); err != nil {
		d.errors++
		return
	}
	if err := d.c.List(ctx, &jobList); err != nil {
		d.errors++
		return
	}
	if err := d.c.List(ctx, &jsList); err != nil {
		d.errors++
		return
	}
	pods := slices.DeleteFunc(podList.Items, func(p corev1.Pod) bool { return !d.ours(p.Namespace) })
	jobs := slices.DeleteFunc(jobList.Items, func(j batchv1.Job) bool { return !d.ours(j.Namespace) })
	jss := slices.DeleteFunc(jsList.Items, func(j jobset.JobSet) bool { return !d.ours(j.Namespace) })
	present := map[string]*batchv1.Job{}
	d.mu.Lock()
	for i := range jobs {
		j := &jobs[i]
		present[j.Name] = j
		rec := d.jobs[j.Name]
		if rec == nil {
			rec = &JobRecord{Terminal: map[types.UID]string{}, Gone: map[types.UID]bool{}}
			d.jobs[j.Name] = rec
		}
		if j.DeletionTimestamp == nil {
			rec.See(j.UID)
		}
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
				rec.Terminal[j.UID] = string(c.Type)
			}
		}
	}
	for name, rec := range d.jobs {
		if cur := rec.Current(); cur != "" && (present[name] == nil || present[name].UID != cur) {
			rec.Gone[cur] = true
		}
	}
	d.mu.Unlock()
	for i := range pods {
		d.observePod(ctx, &pods[i])
	}
	d.checkReleases(ctx, pods)
	for _, r := range d.runs {
		if r.phase == "running" {
			d.stepBatch(ctx, r, pods, present, jss)
		}
	}
	for i := range pods {
		d.finishPod(ctx, &pods[i])
	}
}

// ours tells whether a namespace is the soak's: the main one or a batch's own.
func (d *driver) ours(ns string) bool { return ns == d.ns || strings.HasPrefix(ns, d.ns+"-") }

// nsOf is the namespace of a batch's objects.
func (d *driver) nsOf(b *BatchPlan) string {
	if b.OwnNamespace {
		return d.ns + "-" + b.Name
	}
	return d.ns
}

// checkReleases notes the pods that lost the result finalizer since the last look, and
// checks each once against the chunks of every account of its batch that captures
// results: the chunks are listed after the pods, so a pod released only once it was
// recorded is always found in them.
func (d *driver) checkReleases(ctx context.Context, pods []corev1.Pod) {
	fresh := map[*batchRun][]types.UID{}
	names := map[types.UID]string{}
	d.mu.Lock()
	for i := range pods {
		p := &pods[i]
		if slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
			d.held[p.UID] = true
			continue
		}
		batch, _, _, _, ok := podKey(p)
		r := d.byName[batch]
		_, kind, _ := strings.Cut(p.Annotations[annFate], "/")
		if !ok || r == nil || !d.held[p.UID] || d.released[p.UID] || p.Status.Phase != corev1.PodSucceeded || kind == ResultNone {
			continue
		}
		if !r.plan.RequireResults || r.plan.OwnNamespace {
			continue // no capture, or released unrecorded by design (its namespace goes)
		}
		d.released[p.UID] = true
		fresh[r] = append(fresh[r], p.UID)
		names[p.UID] = p.Name
	}
	d.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	var chunks v1alpha1.ShardResultsList
	if err := d.c.List(ctx, &chunks, client.InNamespace(d.ns)); err != nil {
		d.errors++
		d.mu.Lock()
		for _, uids := range fresh {
			for _, uid := range uids {
				delete(d.released, uid) // checked again on the next look
			}
		}
		d.mu.Unlock()
		return
	}
	for r, uids := range fresh {
		var recorded []map[types.UID]bool
		for _, name := range r.plan.Accounts() {
			recorded = append(recorded, chunkPods(chunks.Items, r.accountUIDs[name], r.forgedChunk))
		}
		for _, uid := range ReleasedEarly(uids, recorded) {
			r.releasedEarly = append(r.releasedEarly, names[uid])
		}
	}
}

// chunkPods are the pod UIDs recorded by the chunks the account of UID uid controls,
// leaving out the chunk named skip (the forger's).
func chunkPods(chunks []v1alpha1.ShardResults, uid types.UID, skip string) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, c := range chunks {
		if owner := metav1.GetControllerOf(&c); owner == nil || owner.UID != uid || uid == "" || (skip != "" && c.Name == skip) {
			continue
		}
		for _, res := range c.Results {
			out[res.PodUID] = true
		}
	}
	return out
}

// startBatch creates the account, and once the controller has observed it (so that the
// Job webhook scopes the Jobs and every pod is held for its result), the Jobs.
func (d *driver) startBatch(ctx context.Context, r *batchRun) {
	b := r.plan
	ns := d.nsOf(b)
	if b.OwnNamespace {
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			wrappers.MakeLocalQueue(mainQueue, ns).ClusterQueue(d.ns + "-gpu").Obj(),
		} {
			if err := ignoreExists(d.c.Create(ctx, obj)); err != nil {
				d.errors++
				return
			}
		}
	}
	for _, name := range b.Accounts() {
		ba := &v1alpha1.BatchAccount{}
		err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ba)
		if apierrors.IsNotFound(err) {
			if err := ignoreExists(d.c.Create(ctx, d.account(b, name))); err != nil {
				d.errors++
			}
			return
		}
		if err != nil {
			d.errors++
			return
		}
		if len(ba.Status.Conditions) == 0 {
			return
		}
		r.accountUIDs[name] = ba.UID
	}
	for _, obj := range d.workloads(b) {
		if err := ignoreExists(d.c.Create(ctx, obj)); err != nil {
			d.errors++
			return
		}
	}
	r.phase = "running"
}

// account builds one of the batch's BatchAccounts.
func (d *driver) account(b *BatchPlan, name string) *v1alpha1.BatchAccount {
	var names []string
	for o := range b.Shards {
		names = append(names, ShardName(o))
	}
	w := wrappers.MakeBatchAccount(name, d.nsOf(b)).Revisions(inputRevision, modelRevision).Shards(names...)
	for _, t := range b.Targets {
		indexes := indexset.Range(0, t.Indexes-1).String()
		ordinals := indexset.Range(t.FirstShard, t.FirstShard+t.Indexes-1).String()
		if b.Shape == ShapeJobSetRestart {
			var rj int32
			// The plan names child Job n of the JobSet "<batch>-js-w-n" (plan.go), always parseable.
			_, _ = fmt.Sscanf(t.Job[strings.LastIndexByte(t.Job, '-')+1:], "%d", &rj)
			w.AssignJobSet(b.Name+"-js", "w", rj, indexes, ordinals)
		} else {
			w.AssignJobOrdinals(t.Job, indexes, ordinals)
		}
	}
	if b.RequireResults && !b.RequireLater {
		w.RequireResults(resultRule)
	}
	return w.Obj()
}

// workloads builds the batch's Jobs, JobSet, queues and preemptor (created later).
func (d *driver) workloads(b *BatchPlan) []client.Object {
	job := func(name string, n int) *wrappers.JobWrapper {
		return wrappers.MakeJob(name, d.nsOf(b)).Indexed(int32(n)).Parallelism(int32(n)).GPU(1).
			PodLabel(labelBatch, b.Name).BackoffLimit(int32(b.FailuresOf(name) + 2))
	}
	switch b.Shape {
	case ShapeJobSetRestart:
		worker := wrappers.MakeJob("", "").Indexed(2).Parallelism(2).GPU(1).BackoffLimit(0).PodLabel(labelBatch, b.Name).Obj()
		return []client.Object{wrappers.MakeJobSet(b.Name+"-js", d.ns).Queue(mainQueue).MaxRestarts(1).
			ReplicatedJob(wrappers.MakeReplicatedJob("w").Replicas(2).Job(worker).Obj()).Obj()}
	case ShapePreemption:
		cq := wrappers.MakeClusterQueue(b.Name + "-" + d.ns).WithinClusterQueue("LowerPriority").
			ResourceGroup(wrappers.GPUFlavorQuotas(preemptFlavor, "64", "512Gi", "3")).Obj()
		lq := wrappers.MakeLocalQueue(b.Name, d.ns).ClusterQueue(cq.Name).Obj()
		t := b.Targets[0]
		return []client.Object{cq, lq, job(t.Job, t.Indexes).Queue(b.Name).PriorityClass(priorityLow).Obj()}
	}
	var out []client.Object
	for _, t := range b.Targets {
		j := job(t.Job, t.Indexes).Queue(mainQueue).Obj()
		if b.TTL != nil {
			j.Spec.TTLSecondsAfterFinished = ptr.To(*b.TTL)
		}
		if b.ReplaceOnFailure {
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		}
		out = append(out, j)
	}
	return out
}

// podKey identifies a pod's batch, Job, generation and index.
func podKey(p *corev1.Pod) (batch string, job string, gen, index int, ok bool) {
	batch = p.Labels[labelBatch]
	job = p.Labels[labelJobName]
	idx, indexed := relations.CompletionIndex(p)
	if batch == "" || job == "" || !indexed {
		return "", "", 0, 0, false
	}
	gen, _ = strconv.Atoi(p.Labels[labelRestart])
	return batch, job, gen, idx, true
}

// observePod records a pod the driver finished once it is seen in a terminal phase, and
// then lets go of it (observeFinalizer).
func (d *driver) observePod(ctx context.Context, p *corev1.Pod) {
	defer d.stopObserving(ctx, p)
	fate, ok := p.Annotations[annFate]
	if !ok {
		return
	}
	batch, job, gen, idx, ok := podKey(p)
	r := d.byName[batch]
	if !ok || r == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A finish whose response was lost is adopted: the pod is not finished twice.
	d.annotated[p.UID] = true
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return
	}
	_, kind, _ := strings.Cut(fate, "/")
	// A graceful pod is unmanaged too, but one of the Job controller's own.
	extra := p.Annotations[kwok.UnmanagedAnnotation] == "true" && p.Annotations[annGraceful] == ""
	d.recordLocked(&PodRecord{Batch: r.plan.Num, Job: job, JobUID: types.UID(p.Labels[labelControllerUID]), Gen: gen, Index: idx,
		Pod: p.Name, UID: p.UID, Succeeded: p.Status.Phase == corev1.PodSucceeded, Result: kind, Extra: extra})
}

// stopObserving removes observeFinalizer from a pod once the driver has seen all it
// waits for: its terminal phase, or its deletion before it ran (it never ends then).
func (d *driver) stopObserving(ctx context.Context, p *corev1.Pod) {
	i := slices.Index(p.Finalizers, observeFinalizer)
	ended := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	if i < 0 || (!ended && p.DeletionTimestamp == nil) {
		return
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": observeFinalizer},
		{"op": "remove", "path": path},
	})
	if err := d.c.Patch(ctx, p, client.RawPatch(types.JSONPatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		d.errors++ // a conflict: the next look tries again
	}
}

// recordLocked records a pod that ended, once; d.mu is held.
func (d *driver) recordLocked(rec *PodRecord) {
	if _, seen := d.pods[rec.UID]; seen {
		return
	}
	d.pods[rec.UID] = rec
	if !rec.Extra {
		// Only attempts that ended count: a pod told to finish but deleted first (its Job
		// suspended by a preemption) never ran its fate, and the next pod of the index
		// gets it again.
		d.attempts[FateKey{rec.Job, rec.Gen, rec.Index, 0}]++
	}
}

// finishPod finishes a Running pod as planned, unless its fate is held by a closed gate
// or it has none.
func (d *driver) finishPod(ctx context.Context, p *corev1.Pod) {
	if p.Status.Phase != corev1.PodRunning || p.Annotations[kwok.ExitCodeAnnotation] != "" {
		return
	}
	batch, job, gen, idx, ok := podKey(p)
	r := d.byName[batch]
	if !ok || r == nil || r.phase != "running" {
		return
	}
	if p.Annotations[annGraceful] != "" {
		d.gracefulStep(ctx, r, p)
		return
	}
	if p.DeletionTimestamp != nil {
		return
	}
	d.mu.Lock()
	if d.annotated[p.UID] {
		d.mu.Unlock()
		return
	}
	attempt := d.attempts[FateKey{job, gen, idx, 0}]
	d.mu.Unlock()
	fate, ok := r.plan.Fates[FateKey{job, gen, idx, attempt}]
	if !ok || (fate.Gate != "" && !r.gates[fate.Gate]) {
		return
	}
	if p.Status.StartTime == nil || time.Since(p.Status.StartTime.Time) < fate.RunFor {
		return
	}
	if fate.Graceful {
		// Only a held pod shows the promise; one the webhook missed goes on after a while.
		if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) && time.Since(p.Status.StartTime.Time) < 20*time.Second {
			return
		}
		// From here on the kubelet's part is the driver's: kwok would kill the pod at once.
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			kwok.UnmanagedAnnotation: "true",
			annGraceful:              "true",
			annFate:                  fmt.Sprintf("%d/%s", attempt, fate.Result),
		}}})
		if err := d.c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
			d.errors++
		}
		return
	}
	if r.plan.KillLeaderAtEnd && d.lastToFinish(r, job, idx) {
		// The leader goes just before the last pod finishes: the Job completes (and its
		// TTL deletes it) while no replica leads.
		if r.killStarted == nil {
			r.killStarted = make(chan struct{})
			if d.killLeader != nil {
				d.killLeader(r.killStarted)
			} else {
				close(r.killStarted)
			}
			return
		}
		select {
		case <-r.killStarted:
		default:
			return
		}
	}
	if r.plan.TTL != nil && *r.plan.TTL == 0 && !slices.Contains(p.Finalizers, observeFinalizer) {
		// Added before the pod is told to end, so it cannot be gone unseen.
		patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/finalizers/-", "value": observeFinalizer}})
		if len(p.Finalizers) == 0 {
			patch, _ = json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/finalizers", "value": []string{observeFinalizer}}})
		}
		if err := d.c.Patch(ctx, p, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			d.errors++
		}
		return // finished at the next look, from the pod as it is then
	}
	msg := d.message(r.plan, job, idx, fate.Result)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		kwok.ExitCodeAnnotation:           strconv.Itoa(int(fate.Exit)),
		kwok.TerminationMessageAnnotation: msg,
		annFate:                           fmt.Sprintf("%d/%s", attempt, fate.Result),
	}}})
	if err := d.c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		d.errors++
		return
	}
	d.mu.Lock()
	d.annotated[p.UID] = true
	d.mu.Unlock()
}

// lastToFinish tells whether every index of the batch but job's idx has succeeded.
func (d *driver) lastToFinish(r *batchRun, job string, idx int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	done := map[string]bool{}
	for _, p := range d.pods {
		if p.Batch == r.plan.Num && p.Succeeded && !p.Extra {
			done[fmt.Sprintf("%s/%d", p.Job, p.Index)] = true
		}
	}
	for _, t := range r.plan.Targets {
		for i := range t.Indexes {
			if !done[fmt.Sprintf("%s/%d", t.Job, i)] && (t.Job != job || i != idx) {
				return false
			}
		}
	}
	return true
}

// gracefulStep plays the kubelet of a pod whose worker exits 0 with its result while it
// terminates: the pod is deleted with a grace period, and a second later its containers
// end with exit 0 and the result, phase Succeeded (kwok leaves the pod alone).
func (d *driver) gracefulStep(ctx context.Context, r *batchRun, p *corev1.Pod) {
	if p.DeletionTimestamp == nil {
		if err := d.c.Delete(ctx, p, client.GracePeriodSeconds(gracePeriod)); err != nil && !apierrors.IsNotFound(err) {
			d.errors++
		}
		return
	}
	if time.Until(p.DeletionTimestamp.Time) > (gracePeriod-1)*time.Second {
		return // deleted less than a second ago
	}
	_, job, gen, idx, _ := podKey(p)
	_, kind, _ := strings.Cut(p.Annotations[annFate], "/")
	msg := d.message(r.plan, job, idx, kind)
	now := metav1.Now()
	st := p.DeepCopy()
	var statuses []corev1.ContainerStatus
	for _, c := range st.Spec.Containers {
		started, image := now, ""
		for _, cs := range st.Status.ContainerStatuses {
			if cs.Name == c.Name {
				image = cs.Image
				if cs.State.Running != nil {
					started = cs.State.Running.StartedAt
				}
			}
		}
		statuses = append(statuses, corev1.ContainerStatus{Name: c.Name, Image: image, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: msg, StartedAt: started, FinishedAt: now},
		}})
	}
	slices.SortFunc(statuses, func(a, b corev1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	st.Status.Phase = corev1.PodSucceeded
	st.Status.ContainerStatuses = statuses
	for i := range st.Status.Conditions {
		if c := &st.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
		}
	}
	if err := d.c.Status().Update(ctx, st); err != nil {
		d.errors++ // a conflict or a lost response: the next look tells
		return
	}
	d.mu.Lock()
	d.recordLocked(&PodRecord{Batch: r.plan.Num, Job: job, JobUID: types.UID(p.Labels[labelControllerUID]), Gen: gen, Index: idx,
		Pod: p.Name, UID: p.UID, Succeeded: true, Result: kind})
	d.mu.Unlock()
}

// message is the termination message of a result kind for a pod of job's index.
func (d *driver) message(b *BatchPlan, job string, index int, kind string) string {
	if kind == ResultNone {
		return ""
	}
	ordinal := -1
	for _, t := range b.Targets {
		if t.Job == job {
			ordinal = t.FirstShard + index
		}
	}
	model := modelRevision
	if kind == ResultWrongModel {
		model = "m-wrong"
	}
	valid := int64(10)
	if kind == ResultShort {
		valid = 9
	}
	shard := ShardName(ordinal)
	msg, err := result.Encode(result.Report{Shard: shard, InputRevision: inputRevision, ModelRevision: model,
		Output: "s3://soak/" + b.Name + "/" + shard, Digest: "sha256:" + b.Name + "-" + shard, Records: 10, Valid: valid})
	if err != nil {
		panic(err) // a fixed, valid report
	}
	return msg
}

// stepBatch takes the batch's scripted steps (preemptor, extra attempt) and notices its end.
func (d *driver) stepBatch(ctx context.Context, r *batchRun, pods []corev1.Pod, present map[string]*batchv1.Job, jss []jobset.JobSet) {
	b := r.plan
	d.mu.Lock()
	succeeded := map[string]map[int]*PodRecord{}
	for _, p := range d.pods {
		if p.Batch == b.Num && p.Succeeded && !p.Extra {
			if succeeded[p.Job] == nil {
				succeeded[p.Job] = map[int]*PodRecord{}
			}
			succeeded[p.Job][p.Index] = p
		}
	}
	d.mu.Unlock()
	switch b.Shape {
	case ShapePreemption:
		low := b.Targets[0].Job
		for i := range pods {
			if _, job, _, idx, ok := podKey(&pods[i]); ok && job == low {
				if r.lowPods[idx] == nil {
					r.lowPods[idx] = map[types.UID]bool{}
				}
				r.lowPods[idx][pods[i].UID] = true
			}
		}
		if r.preemptorAt.IsZero() && succeeded[low][0] != nil {
			h := wrappers.MakeJob(b.Preemptor, d.ns).Indexed(int32(b.PreemptorIndexes)).Parallelism(int32(b.PreemptorIndexes)).GPU(1).
				PodLabel(labelBatch, b.Name).BackoffLimit(2).Queue(b.Name).PriorityClass(priorityHigh).Obj()
			if err := ignoreExists(d.c.Create(ctx, h)); err != nil {
				d.errors++
			} else {
				r.preemptorAt = time.Now()
			}
		}
		if !r.preemptorAt.IsZero() && !r.gates[GatePreempted] {
			j := present[low]
			switch {
			case j != nil && ptr.Deref(j.Spec.Suspend, false):
				r.preempted = true
			case len(r.lowPods[1]) > 1 || len(r.lowPods[2]) > 1:
				r.preempted = true // replaced pods: evicted and re-admitted between two looks
			case time.Since(r.preemptorAt) > 90*time.Second:
				r.note = "no eviction seen within 90s"
			}
			if r.preempted || r.note != "" {
				r.gates[GatePreempted] = true
			}
		}
	case ShapeRepeat:
		t := b.Targets[0]
		if !r.extraDone {
			if src := succeeded[t.Job][b.ExtraAttemptIndex]; src != nil {
				d.addExtra(ctx, r, src, pods)
			}
		}
	case ShapeRequireLater:
		if !r.required && len(succeeded[b.Targets[0].Job]) > 0 {
			d.requireNow(ctx, r)
		}
	case ShapeRuleEdit:
		if !r.ruleTried {
			d.editRule(ctx, r)
		}
	case ShapeForger:
		d.forgeStep(ctx, r, pods)
	case ShapeNamespaceDelete:
		d.namespaceStep(ctx, r, pods, len(succeeded[b.Targets[0].Job]))
	}
	if d.batchDone(r, present, jss) {
		r.phase, r.ended = "done", time.Now()
		return
	}
	if time.Since(r.started) > d.cfg.batchTimeout {
		r.phase, r.ended = "stuck", time.Now()
		r.note = strings.TrimPrefix(r.note+"; ", "; ") + fmt.Sprintf("not finished after %s", d.cfg.batchTimeout)
	}
}

// getAccount reads one of the batch's accounts (nil on an error, counted).
func (d *driver) getAccount(ctx context.Context, r *batchRun, name string) *v1alpha1.BatchAccount {
	ba := &v1alpha1.BatchAccount{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.nsOf(r.plan), Name: name}, ba); err != nil {
		d.errors++
		return nil
	}
	return ba
}

// requireNow turns the coverage account's requireResults on, with the soak's rule.
func (d *driver) requireNow(ctx context.Context, r *batchRun) {
	ba := &v1alpha1.BatchAccount{ObjectMeta: metav1.ObjectMeta{Namespace: d.nsOf(r.plan), Name: r.plan.Name}}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"acceptance": map[string]any{"requireResults": true, "rule": resultRule}}})
	err := d.c.Patch(ctx, ba, client.RawPatch(types.MergePatchType, patch))
	switch {
	case err == nil:
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		// Refused: the batch goes on as a coverage account, and the oracle, expecting
		// every result, reports the verdict wrong.
		r.note = strings.TrimPrefix(r.note+"; turning requireResults on was refused: "+clip(err.Error(), 160), "; ")
	default:
		d.errors++
		return
	}
	r.required = true
	r.gates[GateRequired] = true
}

// editRule tries, once the account recorded a result, to change its acceptance rule to
// one that accepts short results; the CRD must refuse it.
func (d *driver) editRule(ctx context.Context, r *batchRun) {
	ba := d.getAccount(ctx, r, r.plan.Name)
	if ba == nil || ba.Status.Results.Recorded == 0 {
		return
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"acceptance": map[string]any{"rule": editedRule}}})
	err := d.c.Patch(ctx, ba, client.RawPatch(types.MergePatchType, patch))
	switch {
	case err == nil:
		r.ruleAdmitted++
		r.note = strings.TrimPrefix(r.note+"; the rule edit was admitted", "; ")
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		r.ruleRefusal = clip(err.Error(), 200)
	default:
		d.errors++ // a component down: tried again on the next look
		return
	}
	r.ruleTried = true
	r.gates[GateRuleTried] = true
}

// forgeStep is the forger: once the account recorded a result, it creates a chunk of
// forged results for every shard and tries to change the manager's chunks and the
// account's status; then, for forgeWatch, it checks that the account counts none of the
// forged results, and lets the remaining pods finish.
func (d *driver) forgeStep(ctx context.Context, r *batchRun, pods []corev1.Pod) {
	if r.gates[GateForged] {
		return
	}
	ba := d.getAccount(ctx, r, r.plan.Name)
	if ba == nil {
		return
	}
	if r.forgedAt.IsZero() {
		if ba.Status.Results.Recorded == 0 {
			return
		}
		if d.forge(ctx, r, ba) {
			r.forgedAt = time.Now()
		}
		return
	}
	// Every shard the driver told a pod to report a good result for, so far.
	good := map[int]bool{}
	for i := range pods {
		if batch, _, _, idx, ok := podKey(&pods[i]); ok && batch == r.plan.Name && strings.HasSuffix(pods[i].Annotations[annFate], "/"+ResultGood) {
			good[idx] = true
		}
	}
	got := Observed{AcceptedShards: int(ba.Status.Shards.Accepted), Accepted: apimeta.IsStatusConditionTrue(ba.Status.Conditions, v1alpha1.ConditionAccepted)}
	if r.forgedSeen == "" && ForgedCounted(len(good), false, got, 0) {
		r.forgedSeen = fmt.Sprintf("with the forged chunk, %d shards accepted (Accepted %t) while real pods reported %d good results", got.AcceptedShards, got.Accepted, len(good))
	}
	if time.Since(r.forgedAt) > forgeWatch {
		r.gates[GateForged] = true
	}
}

// forgeWatch is how long the forged chunk stands before the remaining pods finish.
const forgeWatch = 6 * time.Second

// forge makes the forger's writes; false when a component was down (tried again).
// The chunk is created for real (the manager must ignore it); the writes that would
// damage the real ledger if admitted (update and delete of the manager's chunk, the
// account's status) are sent with dryRun=All, which runs authorization and every
// admission check (the ledger policy too) and stops short of storing the object.
func (d *driver) forge(ctx context.Context, r *batchRun, ba *v1alpha1.BatchAccount) bool {
	var chunks v1alpha1.ShardResultsList
	if err := d.c.List(ctx, &chunks, client.InNamespace(ba.Namespace), client.MatchingLabels(v1alpha1.ChunkLabels(ba))); err != nil {
		d.errors++
		return false
	}
	var mine *v1alpha1.ShardResults
	for i := range chunks.Items {
		if owner := metav1.GetControllerOf(&chunks.Items[i]); owner != nil && owner.UID == ba.UID {
			mine = &chunks.Items[i]
			break
		}
	}
	if mine == nil {
		return false
	}
	forged := &v1alpha1.ShardResults{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-0-1", ba.UID), Namespace: ba.Namespace, Labels: v1alpha1.ChunkLabels(ba),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ba, v1alpha1.GroupVersion.WithKind("BatchAccount"))},
		},
		Account: ba.Name, AccountUID: ba.UID, FirstOrdinal: 0,
	}
	if slices.ContainsFunc(chunks.Items, func(c v1alpha1.ShardResults) bool { return c.Name == forged.Name }) {
		forged.Name = fmt.Sprintf("%s-forged", ba.UID)
	}
	for _, t := range r.plan.Targets {
		d.mu.Lock()
		uid := d.jobs[t.Job].Current()
		d.mu.Unlock()
		for i := range t.Indexes {
			o := t.FirstShard + i
			forged.Results = append(forged.Results, v1alpha1.RecordedResult{Ordinal: int32(o), Shard: ShardName(o), Target: t.Key,
				JobUID: uid, Index: int32(i), Pod: fmt.Sprintf("%s%s-%d", forgedPrefix, r.plan.Name, o),
				PodUID:        types.UID(fmt.Sprintf("%s%s-%d", forgedPrefix, r.plan.Name, o)),
				InputRevision: inputRevision, ModelRevision: modelRevision, Output: "s3://forged/" + ShardName(o),
				Digest: "sha256:forged-" + ShardName(o), Records: 10, Valid: 10, RecordedAt: metav1.Now(), Sequence: int64(1000 + o)})
		}
	}
	tamper := func() (*v1alpha1.ShardResults, error) {
		var cur v1alpha1.ShardResults
		if err := d.c.Get(ctx, client.ObjectKeyFromObject(mine), &cur); err != nil {
			return nil, err
		}
		if len(cur.Results) > 0 {
			cur.Results[0].ModelRevision = "m-forged"
		}
		cur.Results = append(cur.Results, forged.Results...)
		return &cur, nil
	}
	status, _ := json.Marshal(map[string]any{"status": map[string]any{"shards": map[string]any{"accepted": r.plan.Shards}}})
	const create = "create a forged chunk"
	writes := []struct {
		what  string
		write func() error
	}{
		{create, func() error { return d.forger.Create(ctx, forged.DeepCopy()) }},
		{"update the manager's chunk", func() error {
			cur, err := tamper()
			if err != nil {
				return err
			}
			return d.forger.Update(ctx, cur, client.DryRunAll)
		}},
		{"delete the manager's chunk", func() error { return d.forger.Delete(ctx, mine.DeepCopy(), client.DryRunAll) }},
		{"write the account's status", func() error {
			return d.forger.Status().Patch(ctx, ba.DeepCopy(), client.RawPatch(types.MergePatchType, status), client.DryRunAll)
		}},
	}
	for _, w := range writes {
		var last error
		err := retry(ctx, time.Minute, func() error {
			last = w.write()
			if last == nil || apierrors.IsForbidden(last) || apierrors.IsInvalid(last) || (w.what == create && apierrors.IsAlreadyExists(last)) {
				return nil
			}
			return last // a component down, a conflict: again
		})
		if err != nil {
			d.errors++
			r.note = strings.TrimPrefix(r.note+"; forger: "+w.what+": "+clip(err.Error(), 120), "; ")
			continue
		}
		r.forgedTried++
		// A create retried after its first response was lost finds its own chunk.
		if last == nil || apierrors.IsAlreadyExists(last) {
			r.forgedAdmitted = append(r.forgedAdmitted, w.what)
			if w.what == create {
				r.forgedChunk = forged.Name
			}
		}
	}
	return true
}

// namespaceStep deletes the batch's namespace once its first indexes succeeded (the
// others still run), then times it: when its pods all ended, when it was gone.
func (d *driver) namespaceStep(ctx context.Context, r *batchRun, pods []corev1.Pod, succeeded int) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.nsOf(r.plan)}}
	if r.nsDeletedAt.IsZero() {
		if succeeded < r.plan.FinishBeforeDelete {
			return
		}
		if err := d.c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			d.errors++
			return
		}
		r.nsDeletedAt = time.Now()
		return
	}
	if r.nsPodsEndedAt.IsZero() {
		ended := true
		for _, p := range pods {
			if p.Namespace == ns.Name && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				ended = false
			}
		}
		if ended {
			r.nsPodsEndedAt = time.Now()
		}
	}
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(ns), ns); apierrors.IsNotFound(err) {
		r.nsGoneAt = time.Now()
		if r.nsPodsEndedAt.IsZero() {
			r.nsPodsEndedAt = r.nsGoneAt
		}
	} else if err != nil {
		d.errors++
	}
}

// addExtra adds a second successful attempt on the source pod's index, with its message.
func (d *driver) addExtra(ctx context.Context, r *batchRun, src *PodRecord, pods []corev1.Pod) {
	var pod *corev1.Pod
	for i := range pods {
		if pods[i].UID == src.UID {
			pod = &pods[i]
		}
	}
	if pod == nil {
		return
	}
	kind := ResultNone
	if r.plan.RequireResults {
		kind = ResultGood
	}
	extra, err := kwok.AddSucceededAttempt(ctx, d.c, d.jobController, pod, d.message(r.plan, src.Job, src.Index, kind))
	if err != nil {
		d.errors++
		r.note = "extra attempt: " + err.Error()
		return
	}
	d.mu.Lock()
	d.pods[extra.UID] = &PodRecord{Batch: r.plan.Num, Job: src.Job, JobUID: src.JobUID, Gen: src.Gen, Index: src.Index,
		Pod: extra.Name, UID: extra.UID, Succeeded: true, Result: kind, Extra: true}
	d.annotated[extra.UID] = true
	d.mu.Unlock()
	r.extraDone = true
	r.note = ""
	r.gates[GateExtraDone] = true
}

// batchDone: every target's current identity (and the preemptor) terminated, the JobSet
// finished, and Jobs with a TTL are gone.
func (d *driver) batchDone(r *batchRun, present map[string]*batchv1.Job, jss []jobset.JobSet) bool {
	b := r.plan
	names := []string{}
	for _, t := range b.Targets {
		names = append(names, t.Job)
	}
	if b.Preemptor != "" {
		names = append(names, b.Preemptor)
	}
	if b.OwnNamespace {
		return !r.nsGoneAt.IsZero()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var pods []PodRecord
	for _, p := range d.pods {
		if p.Batch == b.Num {
			pods = append(pods, *p)
		}
	}
	for _, n := range names {
		rec := d.jobs[n]
		t := Target{Job: n}
		if i := slices.IndexFunc(b.Targets, func(t Target) bool { return t.Job == n }); i >= 0 {
			t = b.Targets[i]
		}
		if rec == nil || (rec.Terminal[rec.Current()] == "" && TerminalOf(b, t, pods, d.jobs) == "") {
			return false
		}
		if b.TTL != nil && present[n] != nil {
			return false
		}
	}
	if b.Shape == ShapeJobSetRestart {
		i := slices.IndexFunc(jss, func(js jobset.JobSet) bool { return js.Name == b.Name+"-js" })
		if i < 0 {
			return false
		}
		c := jss[i].Status.Conditions
		if !apimeta.IsStatusConditionTrue(c, string(jobset.JobSetCompleted)) && !apimeta.IsStatusConditionTrue(c, string(jobset.JobSetFailed)) {
			return false
		}
	}
	if b.ExtraAttemptIndex >= 0 && !r.extraDone {
		return false
	}
	return true
}

// records returns a copy of the pod and Job records.
func (d *driver) records() ([]PodRecord, map[string]*JobRecord) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var pods []PodRecord
	for _, p := range d.pods {
		pods = append(pods, *p)
	}
	slices.SortFunc(pods, func(a, b PodRecord) int { return strings.Compare(a.Pod, b.Pod) })
	jobs := map[string]*JobRecord{}
	for n, j := range d.jobs {
		c := &JobRecord{UIDs: slices.Clone(j.UIDs), Terminal: maps.Clone(j.Terminal), Gone: maps.Clone(j.Gone)}
		jobs[n] = c
	}
	return pods, jobs
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// retry calls fn until it succeeds or limit passes.
func retry(ctx context.Context, limit time.Duration, fn func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		sleep(ctx, time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[soak %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
