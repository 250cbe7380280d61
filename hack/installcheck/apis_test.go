package installcheck

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/internal/testsupport/scrape"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestManagerWithoutJobSet runs the real manager on a bare control plane, without JobSet
// and without Kueue: it starts and stays up (healthz answers, the process does not exit
// past the time its caches sync), says which APIs it serves (batchledger_api_served), an
// account naming a JobSet target reports APINotServed instead of waiting for the JobSet,
// and the fail-closed pod webhook admits a results-scoped index pod, adding its
// finalizer. Then JobSet's CRDs are installed: the manager notices within its recheck
// interval and exits cleanly; started again, as its Deployment would, it follows
// JobSets: once the JobSet exists the target waits for its child Job (TargetsNotFound),
// and a JobSet short form gets its account.
func TestManagerWithoutJobSet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := localcluster.BuildBatchledger(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, _, admin := startBareCluster(ctx, t)
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.RESTConfig, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	m, err := localcluster.BatchledgerManager(bin, "--api-recheck-interval=2s")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartManager(ctx, m); err != nil {
		t.Fatal(err)
	}
	name := localcluster.BatchledgerName
	env, _ := c.ManagerEnv(name)
	logFile := c.LogFiles()[name]
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log %s:\n%s", logFile, localcluster.Tail(logFile, 60))
		}
	})
	const ns = "team"
	createPodNamespace(ctx, t, cl, ns)

	// An account of one JobSet child target.
	ba := wrappers.MakeBatchAccount("train", ns).ShardCount("s", 2).AssignJobSet("train", "workers", 0, "0-1", "0-1").Obj()
	if err := cl.Create(ctx, ba); err != nil {
		t.Fatal(err)
	}
	admitted := waitAdmitted(ctx, t, cl, ns, "train", v1alpha1.ReasonAPINotServed)
	if !strings.Contains(admitted.Message, "jobset.x-k8s.io/v1alpha2 JobSet is not served by this cluster") {
		t.Errorf("Admitted message %q does not name the JobSet API", admitted.Message)
	}
	wantServed(ctx, t, env, map[string]float64{"jobset.x-k8s.io/v1alpha2 JobSet": 0, "kueue.x-k8s.io/v1beta2 Workload": 0})

	// The pod webhook answers: a results-scoped index pod is admitted with the finalizer.
	p := createIdlePod(ctx, t, admin, metav1.ObjectMeta{Namespace: ns, Name: "worker-0",
		Labels:      map[string]string{v1alpha1.LabelScope: v1alpha1.ScopeResults},
		Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "0"}})
	if !slices.Contains(p.Finalizers, v1alpha1.ResultFinalizer) {
		t.Errorf("the admitted pod's finalizers %v lack %s: the pod webhook did not mutate it", p.Finalizers, v1alpha1.ResultFinalizer)
	}

	// Still up well past its start: no informer waits for a kind that is not served.
	healthz := fmt.Sprintf("http://%s:%d/healthz", env.Host, env.HealthPort)
	for range 10 {
		if c.Exited(name) {
			t.Fatal("the manager exited without JobSet and Kueue")
		}
		if err := get(ctx, healthz); err != nil {
			t.Fatalf("healthz: %v", err)
		}
		time.Sleep(time.Second)
	}

	// JobSet installed: the manager exits cleanly to follow it.
	jobSet, err := localcluster.JobSetManager()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range jobSet.CRDs {
		crd := crd.DeepCopy()
		crd.ResourceVersion = ""
		if err := cl.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	waitEstablished(ctx, t, cl, jobSet.CRDs)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return c.Exited(name), nil
	}); err != nil {
		t.Fatal("the manager did not exit once JobSet was installed")
	}
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), "exiting to follow the optional APIs the cluster serves now") {
		t.Errorf("the manager's log does not say why it exited (%v)", err)
	}

	// Started again (as its Deployment restarts it) it follows JobSets.
	if _, err := c.RestartComponent(ctx, name); err != nil {
		t.Fatal(err)
	}
	wantServed(ctx, t, env, map[string]float64{"jobset.x-k8s.io/v1alpha2 JobSet": 1, "kueue.x-k8s.io/v1beta2 Workload": 0})
	// Its JobSet created (no JobSet controller runs: it gets no child Jobs), the target
	// waits for its child Job, read through the JobSet informer.
	workers := func(name string) *wrappers.JobSetWrapper {
		return wrappers.MakeJobSet(name, ns).
			ReplicatedJob(wrappers.MakeReplicatedJob("workers").Replicas(1).Job(wrappers.MakeJob("", "").Indexed(2).Obj()).Obj())
	}
	if err := cl.Create(ctx, workers("train").Obj()); err != nil {
		t.Fatal(err)
	}
	waitAdmitted(ctx, t, cl, ns, "train", v1alpha1.ReasonTargetsNotFound)
	js := workers("short").AnnotationPairs(v1alpha1.AnnotationInputRev, "D", v1alpha1.AnnotationModelRev, "m",
		v1alpha1.AnnotationShardCount, "2", v1alpha1.AnnotationReplicatedJob, "workers").Obj()
	if err := cl.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var short v1alpha1.BatchAccount
		return cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "short"}, &short) == nil, nil
	}); err != nil {
		t.Error("the JobSet short form got no account after the restart")
	}
}

// waitAdmitted waits until account name's Admitted condition has reason.
func waitAdmitted(ctx context.Context, t *testing.T, cl client.Client, ns, name, reason string) metav1.Condition {
	t.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var ba v1alpha1.BatchAccount
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ba); err != nil {
			return false, nil
		}
		last = apimeta.FindStatusCondition(ba.Status.Conditions, v1alpha1.ConditionAdmitted)
		return last != nil && last.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("account %s: Admitted %+v, want reason %s", name, last, reason)
	}
	return *last
}

// wantServed checks the batchledger_api_served series of the manager.
func wantServed(ctx context.Context, t *testing.T, env localcluster.ManagerEnv, want map[string]float64) {
	t.Helper()
	f, err := scrape.Get(ctx, env.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	for api, v := range want {
		if got := f.Sum("batchledger_api_served", map[string]string{"api": api}); got != v {
			t.Errorf("batchledger_api_served{api=%q} = %v, want %v", api, got, v)
		}
	}
}

// waitEstablished waits until the API server serves each CRD.
func waitEstablished(ctx context.Context, t *testing.T, cl client.Client, crds []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	for _, want := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := cl.Get(ctx, client.ObjectKey{Name: want.Name}, &crd); err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established", want.Name)
		}
	}
}

// get is one GET that must answer 200.
func get(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
