// Package multikueue is what batchledger knows of Kueue's MultiKueue: which Jobs a
// manager cluster dispatches to worker clusters, which worker a Workload runs on, and
// which manager Workload a worker's copy of a Job was made for. Facts read from Kueue
// v0.17; v0.18 and later write the prebuilt Workload name as an annotation instead of a
// label, and both are read. docs/multikueue.md says what batchledger does with them.
package multikueue

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ManagedBy is the spec.managedBy Kueue's webhook gives a Job queued through a
// ClusterQueue with a MultiKueue AdmissionCheck: the Job controller of the manager leaves
// it alone, its pods run on a worker cluster, and Kueue copies the worker Job's status
// onto it.
const ManagedBy = kueue.MultiKueueControllerName

// PrebuiltWorkloadKey names, on a worker's copy of a Job, the manager Workload it was
// dispatched for: a label in Kueue v0.17, an annotation from v0.18.
const PrebuiltWorkloadKey = "kueue.x-k8s.io/prebuilt-workload-name"

// Dispatched reports whether job is a manager cluster's Job that MultiKueue runs on a
// worker cluster: none of its pods exist here.
func Dispatched(job *batchv1.Job) bool {
	return job != nil && job.Spec.ManagedBy != nil && *job.Spec.ManagedBy == ManagedBy
}

// PrebuiltWorkload is the manager Workload a worker's Job copy was made for, from the
// annotation (Kueue v0.18+) or the label (v0.17); "" for a Job MultiKueue did not copy.
func PrebuiltWorkload(obj metav1.Object) string {
	if name := obj.GetAnnotations()[PrebuiltWorkloadKey]; name != "" {
		return name
	}
	return obj.GetLabels()[PrebuiltWorkloadKey]
}

// OriginLabel is the label MultiKueue puts on each object it copies onto a worker (the
// Workload and the Job), naming the manager that dispatched it.
const OriginLabel = kueue.MultiKueueOriginLabel

// CopiedFor is the manager Workload a worker's Job was dispatched for when the Job
// carries both marks MultiKueue gives its copies, the prebuilt Workload name and the
// origin label; "" for any other Job. The worker role records results only for such a
// Job's pods (docs/multikueue.md, Trust).
func CopiedFor(job metav1.Object) string {
	if _, ok := job.GetLabels()[OriginLabel]; !ok {
		return ""
	}
	return PrebuiltWorkload(job)
}

// Cluster is the worker cluster wl was dispatched to (status.clusterName); "" while it is
// being dispatched and for a Workload that runs where it is queued.
func Cluster(wl *kueue.Workload) string {
	if wl.Status.ClusterName == nil {
		return ""
	}
	return *wl.Status.ClusterName
}

// MaxNominated is how many nominated clusters an observation keeps
// (v1alpha1.WorkloadObservation.NominatedClusters).
const MaxNominated = 16

// Nominated are the worker clusters wl is being dispatched to, the first MaxNominated.
func Nominated(wl *kueue.Workload) []string {
	n := wl.Status.NominatedClusterNames
	if len(n) == 0 {
		return nil
	}
	return append([]string(nil), n[:min(len(n), MaxNominated)]...)
}

// WorkerState is what the manager knows of a worker cluster's records: whether it has a
// kubeconfig for it, whether its records were read since it was given one, and since
// when it does not answer.
type WorkerState struct {
	// Configured: a kubeconfig Secret names the worker.
	Configured bool
	// Synced: its records were read whole at least once since.
	Synced bool
	// UnreachableSince is when the worker stopped answering; zero while it answers.
	UnreachableSince time.Time
	// Err is the last error reading it.
	Err string
}

// Problem says why the worker's records cannot be read now, "" when they can: for the
// account's message ("results of job/x pending on worker-a: <problem>").
func (s WorkerState) Problem(worker string) string {
	switch {
	case !s.Configured:
		return "batchledger has no kubeconfig for " + worker + " (no Secret labelled " + LabelWorkerCluster + "=" + worker + " in its namespace), so it reads no result recorded there"
	case !s.UnreachableSince.IsZero():
		return worker + " not reachable since " + s.UnreachableSince.UTC().Format(time.RFC3339) + " (" + s.Err + ")"
	case !s.Synced:
		return "reading the results recorded on " + worker
	}
	return ""
}

// LabelWorkerCluster on a Secret of batchledger's namespace on the manager cluster makes
// it a worker's kubeconfig (key KubeconfigKey): the value is the worker's name, as
// Kueue's MultiKueueCluster (and so a Workload's status.clusterName) names it.
const LabelWorkerCluster = "batchledger.dev/worker-cluster"

// KubeconfigKey is the key of a worker kubeconfig Secret holding the kubeconfig, as in
// Kueue's MultiKueueCluster Secrets.
const KubeconfigKey = "kubeconfig"
