package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"batchledger.dev/batchledger/internal/testsupport/kwok"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
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

	labelJobName       = batchv1.JobNameLabel
	labelControllerUID = batchv1.ControllerUidLabel
	labelRestart       = relations.LabelRestartAttempt

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
}

// driver plays users and kubelets: it creates the batches, finishes their pods as planned,
// and records what every pod did.
type driver struct {
	c      client.Client
	ns     string
	plan   Plan
	cfg    config
	runs   []*batchRun
	byName map[string]*batchRun // Job or JobSet name prefix (batch name) -> run

	mu        sync.Mutex
	pods      map[types.UID]*PodRecord
	jobs      map[string]*JobRecord
	annotated map[types.UID]bool
	attempts  map[FateKey]int // Attempt 0: how many pods of (job, gen, index) the driver saw end
	errors    int             // API errors the driver retried
}

func newDriver(c client.Client, ns string, plan Plan, cfg config) *driver {
	d := &driver{c: c, ns: ns, plan: plan, cfg: cfg, byName: map[string]*batchRun{},
		pods: map[types.UID]*PodRecord{}, jobs: map[string]*JobRecord{}, annotated: map[types.UID]bool{}, attempts: map[FateKey]int{}}
	for i := range plan.Batches {
		r := &batchRun{plan: &plan.Batches[i], gates: map[string]bool{}, lowPods: map[int]map[types.UID]bool{}}
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
	var pods corev1.PodList
	var jobs batchv1.JobList
	var jss jobset.JobSetList
	if err := d.c.List(ctx, &pods, client.InNamespace(d.ns)); err != nil {
		d.errors++
		return
	}
	if err := d.c.List(ctx, &jobs, client.InNamespace(d.ns)); err != nil {
		d.errors++
		return
	}
	if err := d.c.List(ctx, &jss, client.InNamespace(d.ns)); err != nil {
		d.errors++
		return
	}
	present := map[string]*batchv1.Job{}
	d.mu.Lock()
	for i := range jobs.Items {
		j := &jobs.Items[i]
		present[j.Name] = j
		rec := d.jobs[j.Name]
		if rec == nil {
			rec = &JobRecord{Terminal: map[types.UID]string{}}
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
	d.mu.Unlock()
	for i := range pods.Items {
		d.observePod(&pods.Items[i])
	}
	for _, r := range d.runs {
		if r.phase == "running" {
			d.stepBatch(ctx, r, pods.Items, present, jss.Items)
		}
	}
	for i := range pods.Items {
		d.finishPod(ctx, &pods.Items[i])
	}
}

// startBatch creates the account, and once the controller has observed it (so that the
// Job webhook scopes the Jobs and every pod is held for its result), the Jobs.
func (d *driver) startBatch(ctx context.Context, r *batchRun) {
	b := r.plan
	ba := &v1alpha1.BatchAccount{}
	err := d.c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: b.Name}, ba)
	if apierrors.IsNotFound(err) {
		if err := ignoreExists(d.c.Create(ctx, d.account(b))); err != nil {
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
	for _, obj := range d.workloads(b) {
		if err := ignoreExists(d.c.Create(ctx, obj)); err != nil {
			d.errors++
			return
		}
	}
	r.phase = "running"
}

// account builds the batch's BatchAccount.
func (d *driver) account(b *BatchPlan) *v1alpha1.BatchAccount {
	var names []string
	for o := range b.Shards {
		names = append(names, ShardName(o))
	}
	w := wrappers.MakeBatchAccount(b.Name, d.ns).Revisions(inputRevision, modelRevision).Shards(names...)
	for _, t := range b.Targets {
		indexes := fmt.Sprintf("0-%d", t.Indexes-1)
		ordinals := fmt.Sprintf("%d-%d", t.FirstShard, t.FirstShard+t.Indexes-1)
		if b.Shape == ShapeJobSetRestart {
			var rj int32
			// The plan names child Job n of the JobSet "<batch>-js-w-n" (plan.go), always parseable.
			_, _ = fmt.Sscanf(t.Job[strings.LastIndexByte(t.Job, '-')+1:], "%d", &rj)
			w.AssignJobSet(b.Name+"-js", "w", rj, indexes, ordinals)
		} else {
			w.AssignJobOrdinals(t.Job, indexes, ordinals)
		}
	}
	if b.RequireResults {
		w.RequireResults(resultRule)
	}
	return w.Obj()
}

// workloads builds the batch's Jobs, JobSet, queues and preemptor (created later).
func (d *driver) workloads(b *BatchPlan) []client.Object {
	job := func(name string, n int) *wrappers.JobWrapper {
		return wrappers.MakeJob(name, d.ns).Indexed(int32(n)).Parallelism(int32(n)).GPU(1).
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
		if b.TTL > 0 {
			j.Spec.TTLSecondsAfterFinished = ptr.To(b.TTL)
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

// observePod records a pod the driver finished once it is seen in a terminal phase.
func (d *driver) observePod(p *corev1.Pod) {
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
	if _, seen := d.pods[p.UID]; seen {
		return
	}
	_, kind, _ := strings.Cut(fate, "/")
	rec := &PodRecord{Batch: r.plan.Num, Job: job, JobUID: types.UID(p.Labels[labelControllerUID]), Gen: gen, Index: idx,
		Pod: p.Name, UID: p.UID, Succeeded: p.Status.Phase == corev1.PodSucceeded, Result: kind, Extra: p.Annotations[kwok.UnmanagedAnnotation] == "true"}
	d.pods[p.UID] = rec
	if !rec.Extra {
		// Only attempts that ended count: a pod told to finish but deleted first (its Job
		// suspended by a preemption) never ran its fate, and the next pod of the index
		// gets it again.
		d.attempts[FateKey{job, gen, idx, 0}]++
	}
}

// finishPod finishes a Running pod as planned, unless its fate is held by a closed gate
// or it has none.
func (d *driver) finishPod(ctx context.Context, p *corev1.Pod) {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Annotations[kwok.ExitCodeAnnotation] != "" {
		return
	}
	batch, job, gen, idx, ok := podKey(p)
	r := d.byName[batch]
	if !ok || r == nil || r.phase != "running" {
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
	shard := ShardName(ordinal)
	msg, err := result.Encode(result.Report{Shard: shard, InputRevision: inputRevision, ModelRevision: model,
		Output: "s3://soak/" + b.Name + "/" + shard, Digest: "sha256:" + b.Name + "-" + shard, Records: 10, Valid: 10})
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
	extra, err := kwok.AddSucceededAttempt(ctx, d.c, pod, d.message(r.plan, src.Job, src.Index, kind))
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
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range names {
		rec := d.jobs[n]
		if rec == nil || rec.Terminal[rec.Current()] == "" {
			return false
		}
		if b.TTL > 0 && present[n] != nil {
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
		c := &JobRecord{UIDs: slices.Clone(j.UIDs), Terminal: map[types.UID]string{}}
		for k, v := range j.Terminal {
			c.Terminal[k] = v
		}
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
