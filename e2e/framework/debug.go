package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
)

// DumpState logs what a failed test needs to be understood: the namespace's pods, Jobs,
// JobSets, TrainJobs (where served) and Workloads (with status), its events, the ClusterQueues, and the last lines
// of every component's log when the cluster is local.
func (f *Framework) DumpState() {
	t := f.T
	// The test's context is done by now.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ns := client.InNamespace(f.Namespace)
	var b strings.Builder
	fmt.Fprintf(&b, "===== state of namespace %s =====\n", f.Namespace)

	var pods corev1.PodList
	if err := env.client.List(ctx, &pods, ns); err == nil {
		sortPods(pods.Items)
		fmt.Fprintf(&b, "--- pods (%d)\n%s", len(pods.Items), SummarizePods(pods.Items))
	}
	var jobs batchv1.JobList
	if err := env.client.List(ctx, &jobs, ns); err == nil {
		for i := range jobs.Items {
			fmt.Fprintf(&b, "--- Job %s\n%s", jobs.Items[i].Name, indent(StatusYAML(&jobs.Items[i]))+"\n")
		}
	}
	var jss jobset.JobSetList
	if err := env.client.List(ctx, &jss, ns); err == nil {
		for i := range jss.Items {
			fmt.Fprintf(&b, "--- JobSet %s\n%s", jss.Items[i].Name, indent(StatusYAML(&jss.Items[i]))+"\n")
		}
	}
	// A cluster without Kubeflow Trainer serves no TrainJobs: the List fails and nothing
	// is shown.
	var tjs trainer.TrainJobList
	if err := env.client.List(ctx, &tjs, ns); err == nil {
		for i := range tjs.Items {
			fmt.Fprintf(&b, "--- TrainJob %s\n%s", tjs.Items[i].Name, indent(StatusYAML(&tjs.Items[i]))+"\n")
		}
	}
	var wls kueue.WorkloadList
	if err := env.client.List(ctx, &wls, ns); err == nil {
		for i := range wls.Items {
			fmt.Fprintf(&b, "--- Workload %s\n%s", wls.Items[i].Name, indent(StatusYAML(&wls.Items[i]))+"\n")
		}
	}
	var cqs kueue.ClusterQueueList
	if err := env.client.List(ctx, &cqs); err == nil {
		for i := range cqs.Items {
			cq := &cqs.Items[i]
			fmt.Fprintf(&b, "--- ClusterQueue %s: pending=%d reserving=%d admitted=%d\n", cq.Name,
				cq.Status.PendingWorkloads, cq.Status.ReservingWorkloads, cq.Status.AdmittedWorkloads)
		}
	}
	var events corev1.EventList
	if err := env.client.List(ctx, &events, ns); err == nil {
		sort.SliceStable(events.Items, func(i, j int) bool {
			return events.Items[i].LastTimestamp.Before(&events.Items[j].LastTimestamp)
		})
		fmt.Fprintf(&b, "--- events (%d)\n", len(events.Items))
		for _, e := range events.Items {
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", e.LastTimestamp.Format("15:04:05"), e.Type,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	if c := env.cluster; c != nil {
		files := c.LogFiles()
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "--- last lines of %s (%s)\n%s\n", n, files[n], localcluster.Tail(files[n], 20))
		}
	}
	t.Log(b.String())
}
