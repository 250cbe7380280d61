package main

import (
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/indexset"
	"batchledger.dev/batchledger/pkg/relations"
)

// coverageEvent is a Job's completedIndexes change: at t the account had expected shards
// covered, as far as the watch has seen.
type coverageEvent struct {
	account  string
	t        time.Time
	expected int
}

// coverageShown is a change of the covered count in an account's status
// (status.shards.covered): where the live count is published. The Workload carries the
// verdict and refreshes a count-only message change at most once per
// --workload-message-interval, so it is no latency probe.
type coverageShown struct {
	t       time.Time
	covered int
}

// recorder collects what the load's watches see during one size: the Job status changes
// (what the controller must follow), the coverage each implies, the coverage each
// account's status shows (the latency between the two), and every other change an
// account reads.
type recorder struct {
	mu         sync.Mutex
	accountOf  map[string]string         // job name -> account name
	completed  map[string]map[string]int // account -> job -> completed index count
	jobStatus  map[string]batchv1.JobStatus
	jobChanges int
	done       map[string]bool // jobs with a Complete or Failed condition
	events     []coverageEvent
	shown      map[string][]coverageShown // account name -> covered counts its status showed
	// Everything else the accounts read, so that writes can be set against every observed
	// change: Workload status changes other than batchledger's own conditions (creation
	// included), and pods turning Succeeded (each is an attempt the account counts).
	wlStatus     map[string]kueue.WorkloadStatus
	wlChanges    int
	podSucceeded map[types.UID]bool
}

func newRecorder() *recorder {
	return &recorder{
		accountOf: map[string]string{}, completed: map[string]map[string]int{},
		jobStatus: map[string]batchv1.JobStatus{}, done: map[string]bool{}, shown: map[string][]coverageShown{},
		wlStatus: map[string]kueue.WorkloadStatus{}, podSucceeded: map[types.UID]bool{},
	}
}

// name records that account names job, with the indexes it has completed so far.
func (r *recorder) name(account, job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.completed[account] == nil {
		r.completed[account] = map[string]int{}
	}
	r.accountOf[job] = account
	// A Job named after it started (modeLate) counts what it had completed by then.
	if set, err := indexset.Parse(r.jobStatus[job].CompletedIndexes); err == nil {
		r.completed[account][job] = set.Count()
	}
}

func (r *recorder) job(j *batchv1.Job, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.jobStatus[j.Name]
	if seen && equality.Semantic.DeepEqual(prev, j.Status) {
		return
	}
	if seen || !equality.Semantic.DeepEqual(j.Status, batchv1.JobStatus{}) {
		r.jobChanges++
	}
	r.jobStatus[j.Name] = *j.Status.DeepCopy()
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			r.done[j.Name] = true
		}
	}
	if j.Status.CompletedIndexes == prev.CompletedIndexes {
		return
	}
	set, err := indexset.Parse(j.Status.CompletedIndexes)
	if err != nil {
		return
	}
	acct, named := r.accountOf[j.Name]
	if !named {
		return // a Job no account names: no coverage to show
	}
	r.completed[acct][j.Name] = set.Count()
	total := 0
	for _, n := range r.completed[acct] {
		total += n
	}
	r.events = append(r.events, coverageEvent{account: acct, t: now, expected: total})
}

// observedWorkload counts a change of what the account reads from a Workload.
func (r *recorder) observedWorkload(wl *kueue.Workload) {
	st := *wl.Status.DeepCopy()
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c metav1.Condition) bool {
		return v1alpha1.IsWorkloadCondition(c.Type)
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, seen := r.wlStatus[wl.Name]; seen && equality.Semantic.DeepEqual(prev, st) {
		return
	}
	r.wlStatus[wl.Name] = st
	r.wlChanges++
}

// pod counts a pod's first Succeeded observation.
func (r *recorder) pod(p *corev1.Pod) {
	if p.Status.Phase != corev1.PodSucceeded {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.podSucceeded[p.UID] = true
}

func (r *recorder) workload(wl *kueue.Workload, _ time.Time) {
	r.observedWorkload(wl)
}

// account records a change of the covered count an account's status shows.
func (r *recorder) account(ba *v1alpha1.BatchAccount, now time.Time) {
	n := int(ba.Status.Shards.Covered)
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.shown[ba.Name]; len(s) > 0 && s[len(s)-1].covered == n {
		return
	}
	r.shown[ba.Name] = append(r.shown[ba.Name], coverageShown{t: now, covered: n})
}

// ownerJob is the name of the Job a Workload belongs to (relations.WorkloadOwner), ""
// for a Workload of a JobSet or of nothing.
func ownerJob(wl *kueue.Workload) string {
	if ref := relations.WorkloadOwner(wl); ref != nil && ref.Kind == "Job" {
		return ref.Name
	}
	return ""
}

// latencies matches each coverage event with the first status of its account showing at
// least the expected count; unmatched counts events never shown.
func (r *recorder) latencies() (out []time.Duration, unmatched int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		shown := r.shown[e.account]
		i := slices.IndexFunc(shown, func(s coverageShown) bool { return s.covered >= e.expected })
		if i < 0 {
			unmatched++
			continue
		}
		out = append(out, max(0, shown[i].t.Sub(e.t)))
	}
	return out, unmatched
}

func (r *recorder) allDone(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done) == n
}

// started is how many Jobs have completed an index.
func (r *recorder) started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, st := range r.jobStatus {
		if st.CompletedIndexes != "" {
			n++
		}
	}
	return n
}

// progress is the Jobs finished and the Job status changes seen so far.
func (r *recorder) progress() (done, jobChanges int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done), r.jobChanges
}

// observed is every account's creation, Job status change, Workload change and pod
// success: everything the controller might answer with a write.
func (r *recorder) observed(accounts int) (jobChanges, observed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobChanges, accounts + r.jobChanges + r.wlChanges + len(r.podSucceeded)
}
