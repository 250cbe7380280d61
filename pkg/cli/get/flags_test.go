package get

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
)

// getCluster serves three accounts of ml-team (ij245 missing D, labelled team=nlp;
// ij245-done Accepted; a-fresh without a status) and one of vision.
func getCluster() client.WithWatch {
	s := clitest.SeedSteps()
	named := func(name, namespace string, ba *v1alpha1.BatchAccount, labels map[string]string) *v1alpha1.BatchAccount {
		ba = ba.DeepCopy()
		ba.Name, ba.Namespace, ba.Labels = name, namespace, labels
		ba.CreationTimestamp = metav1.NewTime(clitest.SeedNow.Add(-time.Hour))
		return ba
	}
	return clitest.FakeClient(
		named("ij245", ns, s.Steps[0], map[string]string{"team": "nlp"}),
		named("ij245-done", ns, s.Steps[3], map[string]string{"team": "nlp", "tier": "prod"}),
		named("a-fresh", ns, clitest.IJ245Account(), nil),
		named("seg", "vision", s.Steps[3], map[string]string{"team": "vision"}),
	)
}

// TestGetOutputs: each flag of get, printed through kubectl's printers.
func TestGetOutputs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no headers", []string{"get", "-n", ns, "--no-headers"},
			"ij245        0%     3     4     0     D              ShardsMissing   60m\n" +
				"a-fresh      -      0     4     0     <not judged>   <none>          60m\n" +
				"ij245-done   100%   4     4     4     -              Accepted        60m\n"},
		{"wide", []string{"get", "-n", ns, "-o", "wide"},
			"NAME         PROGRESS   COVERED   TOTAL   ACCEPTED   MISSING        VERDICT         AGE   INPUT   MODEL       TARGETS   REPAIRS\n" +
				"ij245        0%         3         4       0          D              ShardsMissing   60m   D       m-2026-11   1         0\n" +
				"a-fresh      -          0         4       0          <not judged>   <none>          60m   D       m-2026-11   0         0\n" +
				"ij245-done   100%       4         4       4          -              Accepted        60m   D       m-2026-11   1         0\n"},
		{"label selector", []string{"get", "-A", "-l", "team in (nlp,vision),tier!=prod", "--no-headers"},
			"ml-team   ij245   0%     3     4     0     D     ShardsMissing   60m\n" +
				"vision    seg     100%   4     4     4     -     Accepted        60m\n"},
		{"show labels", []string{"get", "-n", ns, "-l", "tier=prod", "--show-labels"},
			"NAME         PROGRESS   COVERED   TOTAL   ACCEPTED   MISSING   VERDICT    AGE   LABELS\n" +
				"ij245-done   100%       4         4       4          -         Accepted   60m   team=nlp,tier=prod\n"},
		{"label columns", []string{"get", "-n", ns, "-l", "team", "-L", "tier", "--no-headers"},
			"ij245        0%     3     4     0     D     ShardsMissing   60m   \n" +
				"ij245-done   100%   4     4     4     -     Accepted        60m   prod\n"},
		{"name", []string{"get", "-A", "-o", "name"},
			"batchaccount.batchledger.dev/a-fresh\nbatchaccount.batchledger.dev/ij245\nbatchaccount.batchledger.dev/ij245-done\nbatchaccount.batchledger.dev/seg\n"},
		{"jsonpath over the list, by namespace and name", []string{"get", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.shards.covered}/{.status.shards.total}{\"\\n\"}{end}"},
			"ml-team/a-fresh 0/0\nml-team/ij245 3/4\nml-team/ij245-done 4/4\nvision/seg 4/4\n"},
		{"jsonpath of one account", []string{"get", "ij245", "-n", ns, "-o", "jsonpath={.apiVersion} {.kind} {.status.shards.missing}"},
			"batchledger.dev/v1alpha1 BatchAccount D"},
		{"go-template", []string{"get", "-n", ns, "-l", "tier=prod", "-o", "go-template={{range .items}}{{.metadata.name}}{{end}}"},
			"ij245-done"},
		{"--template alone is a go-template", []string{"get", "-n", ns, "-l", "tier=prod", "--template", "{{range .items}}{{.metadata.name}}{{end}}"},
			"ij245-done"},
		{"custom columns", []string{"get", "-n", ns, "-o", `custom-columns=NAME:.metadata.name,VERDICT:.status.conditions[?(@.type=="Accepted")].reason,TEAM:metadata.labels.team`},
			"NAME         VERDICT         TEAM\n" +
				"a-fresh      <none>          <none>\n" +
				"ij245        ShardsMissing   nlp\n" +
				"ij245-done   Accepted        nlp\n"},
		{"custom columns keep their headers as written, as kubectl's", []string{"get", "-n", ns, "-l", "team", "-o", "custom-columns=name:.metadata.name,Covered:.status.shards.covered"},
			"name         Covered\n" +
				"ij245        3\n" +
				"ij245-done   4\n"},
		{"yaml of one account", []string{"get", "ij245", "-n", ns, "-o", "yaml"},
			"apiVersion: batchledger.dev/v1alpha1\nkind: BatchAccount\nmetadata:\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, getCluster(), tc.args...)
			if code != options.ExitOK || errOut != "" {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if !strings.HasPrefix(out, tc.want) || (!strings.HasSuffix(tc.want, "metadata:\n") && out != tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", out, tc.want)
			}
		})
	}
}

// TestGetJSONIsAList: -o json prints a kubectl List of BatchAccounts that jq can read.
func TestGetJSONIsAList(t *testing.T) {
	out, errOut, code := run(t, getCluster(), "get", "-n", ns, "-o", "json")
	if code != options.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var list struct {
		APIVersion, Kind string
		Items            []v1alpha1.BatchAccount
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	var names []string
	for _, ba := range list.Items {
		if ba.Kind != "BatchAccount" || ba.APIVersion != "batchledger.dev/v1alpha1" {
			t.Errorf("item %s is %s %s", ba.Name, ba.APIVersion, ba.Kind)
		}
		names = append(names, ba.Name)
	}
	if list.Kind != "List" || list.APIVersion != "v1" || strings.Join(names, " ") != "a-fresh ij245 ij245-done" {
		t.Errorf("%s %s of %v", list.APIVersion, list.Kind, names)
	}
}

// TestGetRefuses: flags that cannot go together, or formats get does not print.
func TestGetRefuses(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"get", "-o", "bogus"}, `error: unable to match a printer suitable for the output format "bogus"`},
		{[]string{"get", "-o", "custom-columns"}, "error: custom-columns format specified but no custom columns given"},
		{[]string{"get", "-o", "custom-columns=NAME"}, `error: unexpected custom-columns spec "NAME"`},
		{[]string{"get", "ij245", "-l", "team=nlp"}, "error: a BatchAccount name cannot be given with -l or --field-selector"},
		{[]string{"get", "-l", "team in"}, `error: -l "team in"`},
		{[]string{"get", "ij245", "-A"}, "error: a BatchAccount name needs a namespace"},
	}
	for _, tc := range cases {
		out, errOut, code := run(t, getCluster(), append(tc.args, "-n", ns)...)
		if code != options.ExitError || out != "" || !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestGetWatch: -w prints the table, then a row per change, under the one header; with
// -o name, one name per change; --watch-only skips the list.
func TestGetWatch(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"table", []string{"get", "-n", ns, "-l", "team=nlp", "-w"},
			"NAME         PROGRESS   COVERED   TOTAL   ACCEPTED   MISSING   VERDICT         AGE\n" +
				"ij245        0%         3         4       0          D         ShardsMissing   60m\n" +
				"ij245-done   100%       4         4       4          -         Accepted        60m\n" +
				"ij245        100%       4         4       4          -         Accepted        60m\n"},
		{"watch only, by name", []string{"get", "-n", ns, "-l", "team=nlp", "--watch-only", "-o", "name"},
			"batchaccount.batchledger.dev/ij245\n"},
		{"one account", []string{"get", "ij245", "-n", ns, "-w", "--no-headers", "-o", "custom-columns=N:.metadata.name,V:.status.shards.covered"},
			"ij245   3\nij245   4\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var watches atomic.Int32
			c := interceptor.NewClient(getCluster(), interceptor.Funcs{Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
				defer watches.Add(1)
				return c.Watch(ctx, list, opts...)
			}})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			out := &syncBuffer{}
			done := make(chan int)
			go func() { done <- runWith(t, ctx, c, out, tc.args...) }()
			// The change lands once the watch is up: the fake client replays nothing.
			waitFor(t, func() bool { return watches.Load() > 0 })
			accepted := clitest.SeedSteps().Steps[3]
			var ba v1alpha1.BatchAccount
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ij245"}, &ba); err != nil {
				t.Fatal(err)
			}
			ba.Status = accepted.Status
			if err := c.Status().Update(ctx, &ba); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return strings.Count(out.String(), "\n") >= strings.Count(tc.want, "\n") })
			cancel()
			if code := <-done; code != options.ExitOK {
				t.Errorf("exit %d", code)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// syncBuffer is a buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runWith executes get against c until ctx ends, writing stdout to out, and
// returns the exit code.
func runWith(t *testing.T, ctx context.Context, c client.Client, out *syncBuffer, args ...string) int {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
	errOut := &syncBuffer{}
	o := options.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
	o.NewClient = func() (client.Client, error) { return c, nil }
	o.Clock = func() time.Time { return clitest.SeedNow }
	cmd := clitest.Root(o, NewCommand)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	code := options.ExitCodeOf(cmd.ExecuteContext(ctx), errOut)
	if code != options.ExitOK {
		t.Logf("stderr: %s", errOut)
	}
	return code
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestGetWithoutTheCRD: on a cluster that does not serve the BatchAccount API, get says
// that batchledger is not installed, for a list and for a name.
func TestGetWithoutTheCRD(t *testing.T) {
	noMatch := &meta.NoKindMatchError{GroupKind: v1alpha1.GroupVersion.WithKind("BatchAccount").GroupKind(), SearchedVersions: []string{v1alpha1.GroupVersion.Version}}
	c := interceptor.NewClient(clitest.FakeClient(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return noMatch
		},
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return noMatch },
	})
	for _, args := range [][]string{{"get", "-n", ns}, {"get", "-A"}, {"get", "ij245", "-n", ns}} {
		_, errOut, code := run(t, c, args...)
		if code != options.ExitError || !strings.Contains(errOut, "the BatchAccount API (batchledger.dev/v1alpha1) is not served by this cluster: is batchledger installed?") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestGetWatchNameNotFound: get NAME -w (or --watch-only) of an account that does not
// exist fails at once, as kubectl get NAME -w does, rather than watch for nothing.
func TestGetWatchNameNotFound(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"watch", []string{"get", "nope", "-n", ns, "-w"}},
		{"watch only", []string{"get", "nope", "-n", ns, "--watch-only", "-o", "name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
			out, errOut := &syncBuffer{}, &syncBuffer{}
			o := options.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut})
			o.NewClient = func() (client.Client, error) { return getCluster(), nil }
			cmd := clitest.Root(o, NewCommand)
			cmd.SetArgs(tc.args)
			code := options.ExitCodeOf(cmd.ExecuteContext(ctx), errOut)
			if ctx.Err() != nil {
				t.Fatalf("still watching after %v; stdout %q", 3*time.Second, out)
			}
			if want := `error: BatchAccount "nope" not found in namespace "ml-team"`; code != options.ExitError || !strings.HasPrefix(errOut.String(), want) || out.String() != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
			}
		})
	}
}
