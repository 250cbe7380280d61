package account

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// mkWorkload is the manager Workload job-j of a MultiKueue batch as observed: dispatched
// to cluster (status.clusterName), or nominated to some while being dispatched.
type mkWorkload struct{ v1alpha1.WorkloadObservation }

func managerWorkload() *mkWorkload {
	return &mkWorkload{v1alpha1.WorkloadObservation{Name: "job-j", ClusterQueue: "ml-team",
		Flavors: []string{"main=nvidia.com/gpu:h100"}}}
}
func (w *mkWorkload) nominated(clusters ...string) *mkWorkload {
	w.NominatedClusters = clusters
	return w
}
func (w *mkWorkload) admittedOn(cluster string) *mkWorkload {
	w.Admitted, w.Cluster = true, cluster
	return w
}
func (w *mkWorkload) evictedFrom(cluster string) *mkWorkload {
	w.Evicted, w.Cluster, w.EvictionReason = true, cluster, "AdmissionCheck"
	return w
}
func (w *mkWorkload) obs() *v1alpha1.WorkloadObservation { return &w.WorkloadObservation }

// TestAdmissionsAcrossWorkerClusters: every admission of a dispatched Job records the
// worker cluster it ran on, and the indexes that completed there, however Kueue's
// updates are observed.
func TestAdmissionsAcrossWorkerClusters(t *testing.T) {
	minute := func(i int) metav1.Time { return metav1.NewTime(time0.Add(time.Duration(i) * time.Minute)) }
	type step struct {
		completed string
		w         *mkWorkload
	}
	cases := []struct {
		name  string
		steps []step
		want  []v1alpha1.Admission
	}{
		{
			name: "evicted from worker-a, dispatched to worker-b: both, each with its indexes",
			steps: []step{
				{"", managerWorkload().nominated("worker-a", "worker-b")},
				{"", managerWorkload().admittedOn("worker-a")},
				{"0,1", managerWorkload().admittedOn("worker-a")},
				{"0,1", managerWorkload().evictedFrom("worker-a")},
				{"0,1", managerWorkload().nominated("worker-b")},
				{"0-2", managerWorkload().admittedOn("worker-b")},
				{"0-3", managerWorkload().admittedOn("worker-b")},
			},
			want: []v1alpha1.Admission{
				{Workload: "job-j", ClusterQueue: "ml-team", Cluster: "worker-a", Flavors: []string{"main=nvidia.com/gpu:h100"},
					AdmittedAt: minute(1), EvictedAt: ptr.To(minute(3)), EvictionReason: "AdmissionCheck", CompletedIndexes: "0,1"},
				{Workload: "job-j", ClusterQueue: "ml-team", Cluster: "worker-b", Flavors: []string{"main=nvidia.com/gpu:h100"},
					AdmittedAt: minute(5), CompletedIndexes: "2,3"},
			},
		},
		{
			name: "re-dispatched between two observations (the eviction not seen): two admissions, the first ended",
			steps: []step{
				{"0", managerWorkload().admittedOn("worker-a")},
				{"0-3", managerWorkload().admittedOn("worker-b")},
			},
			want: []v1alpha1.Admission{
				{Workload: "job-j", ClusterQueue: "ml-team", Cluster: "worker-a", Flavors: []string{"main=nvidia.com/gpu:h100"},
					AdmittedAt: minute(0), EvictedAt: ptr.To(minute(1)), CompletedIndexes: "0"},
				{Workload: "job-j", ClusterQueue: "ml-team", Cluster: "worker-b", Flavors: []string{"main=nvidia.com/gpu:h100"},
					AdmittedAt: minute(1), CompletedIndexes: "1-3"},
			},
		},
		{
			name: "the cluster seen after the admission: one admission, the cluster filled in",
			steps: []step{
				{"", managerWorkload().admittedOn("")},
				{"0-3", managerWorkload().admittedOn("worker-a")},
			},
			want: []v1alpha1.Admission{
				{Workload: "job-j", ClusterQueue: "ml-team", Cluster: "worker-a", Flavors: []string{"main=nvidia.com/gpu:h100"},
					AdmittedAt: minute(0), CompletedIndexes: "0-3"},
			},
		},
		{
			name: "a Workload that runs where it is queued names no cluster",
			steps: []step{
				{"", managerWorkload().admittedOn("")},
				{"0-3", managerWorkload().admittedOn("")},
			},
			want: []v1alpha1.Admission{
				{Workload: "job-j", ClusterQueue: "ml-team", Flavors: []string{"main=nvidia.com/gpu:h100"},
					AdmittedAt: minute(0), CompletedIndexes: "0-3"},
			},
		},
	}
	four := []string{"A", "B", "C", "D"}
	spec := makeSpec(four...).AssignJob("j", "0-3", four...).SpecObj()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st v1alpha1.BatchAccountStatus
			var last map[string]Observation
			for i, s := range tc.steps {
				n := int32(mustParse(t, s.completed).Count())
				last = map[string]Observation{"job/j": {Job: makeJob("j", "uid-j", 4).Completed(s.completed, n).Facts(), Workload: s.w.obs()}}
				st = at(spec, &st, time.Duration(i)*time.Minute, last).Status
			}
			wantFixedPoint(t, spec, st, time.Hour, last)
			if got := st.Targets[0].Admissions; !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("admissions =\n%+v\nwant\n%+v", got, tc.want)
			}
			if got, want := st.Targets[0].Workload.Cluster, tc.steps[len(tc.steps)-1].w.Cluster; got != want {
				t.Errorf("workload cluster = %q, want %q", got, want)
			}
		})
	}
}

// TestDispatchedJobCoverage: a Job dispatched by MultiKueue has no pod on the manager
// (the controller lists none: PodsListed false) and the status Kueue copied from its
// worker. Its shards are covered under the manager's identity, and a completed index
// without a pod here is not a result lost.
func TestDispatchedJobCoverage(t *testing.T) {
	four := []string{"A", "B", "C", "D"}
	copied := completeJob("j", "uid-manager-j", 4).Facts()
	onWorker := managerWorkload().admittedOn("worker-a").obs()
	cases := []struct {
		name string
		spec *v1alpha1.BatchAccountSpec
		// onWorker, problem and listed are what the controller observed of the worker's
		// results (ResultsOnWorker, WorkerProblem, PodsListed).
		onWorker                 bool
		problem                  string
		listed                   bool
		wantResults, wantVerdict string
		wantResultsMessage       string
		wantMissing              int
	}{
		{name: "coverage account", spec: makeSpec(four...).AssignJob("j", "0-3", four...).SpecObj(),
			wantResults: v1alpha1.ReasonResultsNotRequired, wantVerdict: v1alpha1.ReasonAccepted},
		{name: "results account, no worker read: pending, never MissingResult, saying where the pods ran", spec: makeSpec(four...).AssignJob("j", "0-3", four...).RequireResults("").SpecObj(),
			wantResults: v1alpha1.ReasonResultsPending, wantVerdict: v1alpha1.ReasonResultsPending,
			wantResultsMessage: "0/4 shard results accepted; waiting for A..D; job j in MultiKueue worker cluster worker-a: its pods are not on this cluster, " +
				"and batchledger records no result from a worker cluster"},
		{name: "results read from the worker: pending until they are", spec: makeSpec(four...).AssignJob("j", "0-3", four...).RequireResults("").SpecObj(),
			onWorker: true, wantResults: v1alpha1.ReasonResultsPending, wantVerdict: v1alpha1.ReasonResultsPending,
			wantResultsMessage: "0/4 shard results accepted; waiting for A..D; job j in MultiKueue worker cluster worker-a: its results are read from the worker as batchledger records them there"},
		{name: "worker not reachable: pending, naming it", spec: makeSpec(four...).AssignJob("j", "0-3", four...).RequireResults("").SpecObj(),
			onWorker: true, problem: "worker-a not reachable since 2026-01-01T12:03:00Z (connection refused)",
			wantResults: v1alpha1.ReasonResultsPending, wantVerdict: v1alpha1.ReasonResultsPending,
			wantResultsMessage: "0/4 shard results accepted; waiting for A..D; results of job j pending on worker-a: worker-a not reachable since 2026-01-01T12:03:00Z (connection refused)"},
		{name: "worker removed: the terminated Job's results are missing", spec: makeSpec(four...).AssignJob("j", "0-3", four...).RequireResults("").SpecObj(),
			onWorker: true, problem: "batchledger has no kubeconfig for worker-a", listed: true,
			wantResults: v1alpha1.ReasonMissingResult, wantVerdict: v1alpha1.ReasonMissingResult, wantMissing: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := map[string]Observation{"job/j": {Job: copied, Workload: onWorker, ResultsOnWorker: tc.onWorker, WorkerProblem: tc.problem, PodsListed: tc.listed}}
			st := at(tc.spec, nil, 0, obs).Status
			wantCond(t, st, v1alpha1.ConditionShardsCovered, metav1.ConditionTrue, v1alpha1.ReasonAllShardsCovered, "4/4 shards covered")
			wantCond(t, st, v1alpha1.ConditionResultsAccepted, condStatus(tc.wantResults == v1alpha1.ReasonResultsNotRequired), tc.wantResults, tc.wantResultsMessage)
			wantCond(t, st, v1alpha1.ConditionAccepted, condStatus(tc.wantVerdict == v1alpha1.ReasonAccepted), tc.wantVerdict, "")
			tgt := st.Targets[0]
			// Attempts are counted from the copied status (one per index): repeats happen
			// on the worker, out of the manager's sight.
			if tgt.UID != "uid-manager-j" || tgt.CompletedIndexes != "0-3" || tgt.SuccessfulAttempts != 4 {
				t.Errorf("target uid %q completed %q attempts %d; want the manager's identity, 0-3, 4 attempts",
					tgt.UID, tgt.CompletedIndexes, tgt.SuccessfulAttempts)
			}
			if st.Results.Missing != int32(tc.wantMissing) {
				t.Errorf("%d results missing, want %d", st.Results.Missing, tc.wantMissing)
			}
			if tgt.Workload == nil || tgt.Workload.Cluster != "worker-a" {
				t.Errorf("workload %+v, want it on worker-a", tgt.Workload)
			}
		})
	}
}

func condStatus(ok bool) metav1.ConditionStatus {
	if ok {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// TestNominatedClustersBounded: the clusters a Workload is being dispatched to share the
// flavors' bound, which shrinks with the number of targets, so that a large account's
// status stays within its size budget; the observation passed in is not changed.
func TestNominatedClustersBounded(t *testing.T) {
	var many []string
	for i := range 20 {
		many = append(many, fmt.Sprintf("worker-%02d", i))
	}
	for _, tc := range []struct {
		targets, want int
	}{{1, 16}, {64, 8}, {MaxTargets, 0}} {
		w := managerWorkload().nominated(many...).obs()
		got := boundWorkload(w, limitsFor(tc.targets))
		if len(got.NominatedClusters) != tc.want || len(w.NominatedClusters) != len(many) {
			t.Errorf("%d targets: %d nominated clusters kept (of the caller's %d), want %d",
				tc.targets, len(got.NominatedClusters), len(w.NominatedClusters), tc.want)
		}
	}
}
