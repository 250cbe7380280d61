// Package framework runs batchledger's end-to-end tests against a real cluster: by default a
// local control plane started once per test binary (see localcluster), or, with
// E2E_USE_EXISTING_CLUSTER=true, whatever cluster KUBECONFIG points at (kind, a cluster
// left running by `go run ./hack/cluster up`, ...).
//
// A test package wires it in from TestMain:
//
//	func TestMain(m *testing.M) { framework.Setup(m) }
//
// and each test takes a fresh namespace (deleted when it ends, after a dump of its pods,
// Jobs, JobSets, Workloads, events and the control plane's log tails if it failed):
//
//	f := framework.New(t)
//	f.Create(wrappers.MakeJob("train", f.Namespace).Indexed(4).Queue("default").Obj())
//
// The kubelet helpers (FinishIndexPod, CopyIndexPodAsSucceeded, ...) drive pods on the kwok
// nodes of the local cluster through the stages in internal/testsupport/kwok; an existing
// cluster needs kwok with those stages (and GPU nodes labelled gpu-type) for the tests
// that use them.
//
// Tests run in parallel (t.Parallel) up to DefaultParallel at a time: each owns its
// namespace and its ClusterQueues, so only the GPU nodes are shared.
package framework

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
	"batchledger.dev/batchledger/pkg/scheme"
)

// UseExistingClusterEnv set to "true" runs the suite against the cluster in KUBECONFIG.
const UseExistingClusterEnv = "E2E_USE_EXISTING_CLUSTER"

// Scheme knows the types e2e tests use: core, batch, Kueue v1beta2, JobSet v1alpha2, Kubeflow Trainer v1alpha1 and batchledger v1alpha1.
var Scheme = scheme.Must()

// withBatchledger is set by SetupWithBatchledger: the local cluster then also runs the
// batchledger controller.
var withBatchledger bool

// env is the cluster shared by every test of the binary.
var env struct {
	cluster *localcluster.Cluster // nil for an existing cluster
	config  *rest.Config
	client  client.Client
	// kwokNodes: the GPU nodes are kwok's (the local control plane), not real kubelets.
	kwokNodes bool
}

// Option adjusts Setup.
type Option func(*localcluster.Options)

// WithManagers adds controller managers (for example the batchledger controller, with its
// webhooks) to the local cluster; they start after Kueue and JobSet. Against an existing
// cluster they are expected to be deployed already and are not started.
func WithManagers(managers ...localcluster.Manager) Option {
	return func(o *localcluster.Options) { o.Managers = append(o.Managers, managers...) }
}

// WithTrainer also runs the Kubeflow Trainer manager on the local cluster, with Kueue's
// TrainJob integration and the localcluster.TrainerRuntime ClusterTrainingRuntime (off by
// default: it lengthens every start). An existing cluster is expected to have them.
func WithTrainer() Option {
	return func(o *localcluster.Options) { o.Trainer = true }
}

// Setup starts the cluster (or connects to an existing one), runs the tests and exits with
// their status. Call it from TestMain.
func Setup(m *testing.M, opts ...Option) {
	os.Exit(setup(m, opts))
}

func setup(m *testing.M, opts []Option) int {
	raiseParallelism()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if os.Getenv(UseExistingClusterEnv) == "true" {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s=true but KUBECONFIG is unusable: %v\n", UseExistingClusterEnv, err)
			return 1
		}
		env.config = cfg
		fmt.Fprintf(os.Stderr, "e2e: using the existing cluster at %s\n", cfg.Host)
	} else {
		o := localcluster.Options{Log: logWriter()}
		for _, opt := range opts {
			opt(&o)
		}
		c, err := localcluster.Start(ctx, o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: starting the local cluster failed: %v\n", err)
			return 1
		}
		defer func() {
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: stopping the local cluster: %v\n", err)
			}
		}()
		fmt.Fprintf(os.Stderr, "e2e: local cluster ready in %s (state dir %s)\n", c.StartupDuration.Round(10*time.Millisecond), c.StateDir)
		env.cluster = c
		env.config = rest.CopyConfig(c.RESTConfig)
		if withBatchledger {
			dir, err := startBatchledger(ctx, c)
			if dir != "" {
				// Runs before the cluster's Stop (defers run last first): removing the
				// binary of a running process is harmless on Linux.
				defer os.RemoveAll(dir)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "e2e: starting the batchledger controller failed: %v\n", err)
				return 1
			}
		}
	}
	env.config.QPS, env.config.Burst = 100, 200
	cl, err := client.New(env.config, client.Options{Scheme: Scheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: client: %v\n", err)
		return 1
	}
	env.client = cl
	if err := detectKubelets(ctx, cl); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	return m.Run()
}

// DefaultParallel is how many tests run at once unless -test.parallel says otherwise. E2E
// tests mostly wait (on controllers, on the Job controller's backoffs), so more than the
// default GOMAXPROCS — 2 on CI machines — pays off.
const DefaultParallel = 8

func raiseParallelism() {
	if !flag.Parsed() {
		flag.Parse()
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(DefaultParallel))
	}
}

// logWriter shows the start-up steps with -v or E2E_VERBOSE=true; quiet otherwise.
func logWriter() io.Writer {
	if os.Getenv("E2E_VERBOSE") == "true" {
		return os.Stderr
	}
	for _, a := range os.Args {
		if a == "-test.v" || a == "-test.v=true" {
			return os.Stderr
		}
	}
	return nil
}

// Client returns the shared admin client (Scheme types).
func Client() client.Client { return env.client }

// RESTConfig returns the shared admin REST configuration.
func RESTConfig() *rest.Config { return rest.CopyConfig(env.config) }

// Cluster returns the local cluster, or nil when running against an existing one.
func Cluster() *localcluster.Cluster { return env.cluster }

// Framework is one test's view of the cluster: its namespace and a client.
type Framework struct {
	// T is the test.
	T *testing.T
	// Ctx ends when the test does.
	Ctx context.Context
	// Client is the admin client (Scheme types).
	Client client.Client
	// Namespace is the test's own namespace.
	Namespace string
}

// New gives the test a fresh namespace, deleted when the test ends; if the test failed, the
// namespace's state and the components' log tails are logged first. A test drives its pods
// through kwok's stages unless an option says otherwise (OnRealKubelets); one whose kind of
// node the cluster lacks is skipped, with the reason.
func New(t *testing.T, opts ...TestOption) *Framework {
	t.Helper()
	if env.client == nil {
		t.Fatal("framework.Setup was not called from TestMain")
	}
	skipUnlessKubelets(t, opts)
	f := &Framework{T: t, Ctx: t.Context(), Client: env.client}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	if err := env.client.Create(f.Ctx, ns); err != nil {
		t.Fatalf("create test namespace: %v", err)
	}
	f.Namespace = ns.Name
	t.Cleanup(func() {
		// Background deletion: the next test need not wait for the namespace to drain.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := env.client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", ns.Name, err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			f.DumpState()
		}
	})
	// The ServiceAccount admission plugin rejects pods until the namespace's default
	// ServiceAccount exists; without waiting, a Job's first pods would be refused and retried
	// with the Job controller's backoff.
	Eventually(t, DefaultTimeout, "default ServiceAccount in namespace "+f.Namespace, func() (bool, string, error) {
		err := env.client.Get(f.Ctx, client.ObjectKey{Namespace: f.Namespace, Name: "default"}, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return false, "not created yet", nil
		}
		return err == nil, "", err
	})
	return f
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespacePrefix turns a test name into a namespace name prefix (the API server appends a
// random suffix).
func namespacePrefix(testName string) string {
	s := nonDNS.ReplaceAllString(strings.ToLower(strings.TrimPrefix(testName, "Test")), "-")
	s = strings.Trim(s, "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	return "e2e-" + s + "-"
}

// Create creates obj, in the test's namespace if it is namespaced and has none. Cluster-scoped
// objects other than ResourceFlavors (shared infrastructure) are deleted when the test ends.
func (f *Framework) Create(obj client.Object) {
	f.T.Helper()
	namespaced, err := env.client.IsObjectNamespaced(obj)
	if err != nil {
		f.T.Fatalf("create %T: %v", obj, err)
	}
	if namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace(f.Namespace)
	}
	if err := env.client.Create(f.Ctx, obj); err != nil {
		f.T.Fatalf("create %s: %v", describe(obj), err)
	}
	if !namespaced {
		if _, shared := obj.(*kueue.ResourceFlavor); !shared {
			f.T.Cleanup(func() { deleteInBackground(f.T, obj) })
		}
	}
}

// deleteInBackground deletes a cluster-scoped object without waiting: Kueue keeps a
// ClusterQueue (finalizer) until the workloads of the test's namespace are gone.
func deleteInBackground(t *testing.T, obj client.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		t.Logf("delete %s: %v", describe(obj), err)
	}
}

// Get reads obj (by its name and namespace) fresh from the API server.
func (f *Framework) Get(obj client.Object) {
	f.T.Helper()
	if err := env.client.Get(f.Ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		f.T.Fatalf("get %s: %v", describe(obj), err)
	}
}

// describe names an object for messages: "Job ns/name".
func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		if gvk, err := env.client.GroupVersionKindFor(obj); err == nil {
			kind = gvk.Kind
		} else {
			kind = fmt.Sprintf("%T", obj)
		}
	}
	name := obj.GetName()
	if name == "" {
		name = obj.GetGenerateName() + "*"
	}
	if obj.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", kind, obj.GetNamespace(), name)
	}
	return kind + " " + name
}

// JobPods lists the pods of a Job (by its controller-uid label), oldest first.
func JobPods(t testing.TB, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	err := env.client.List(t.Context(), &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)})
	if err != nil {
		t.Fatalf("list pods of Job %s/%s: %v", job.Namespace, job.Name, err)
	}
	sortPods(pods.Items)
	return pods.Items
}
