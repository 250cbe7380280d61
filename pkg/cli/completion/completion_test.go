package completion_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/cli"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestCompletion: cobra's __complete (what the completion scripts and
// kubectl_complete-batchledger call) completes verbs, kinds, account and object names of
// the namespace, namespaces, and flag values, from a fake cluster.
func TestCompletion(t *testing.T) {
	s := clitest.SeedSteps()
	c := clitest.FakeClient(
		s.Steps[0].DeepCopy(), s.Job.DeepCopy(), clitest.WorkloadOf(s.Job),
		wrappers.MakeBatchAccount("ij245-done", ns).Obj(), wrappers.MakeBatchAccount("other", ns).Obj(),
		wrappers.MakeBatchAccount("elsewhere", "vision").Obj(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vision"}},
	)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"accounts of the namespace", []string{"get", "-n", ns, ""}, []string{"ij245", "ij245-done", "other"}},
		{"accounts by prefix", []string{"repair", "-n", ns, "ij"}, []string{"ij245", "ij245-done"}},
		{"accounts of the other namespace", []string{"map", "--namespace", "vision", ""}, []string{"elsewhere"}},
		{"one account only", []string{"repair", "-n", ns, "ij245", ""}, nil},
		{"kinds", []string{"explain", "-n", ns, ""}, []string{"account\ta BatchAccount", "workload\ta Kueue Workload: the accounts of its owner", "job\ta Job: the accounts naming it", "jobset\ta JobSet: the accounts naming its children", "trainjob\ta TrainJob: the accounts naming its children"}},
		{"Jobs", []string{"explain", "-n", ns, "job", ""}, []string{"j"}},
		{"Workloads by alias", []string{"watch", "-n", ns, "wl", "job-"}, []string{"job-j-3f2c9"}},
		{"KIND/NAME", []string{"explain", "-n", ns, "account/ij"}, []string{"account/ij245", "account/ij245-done"}},
		{"unknown kind", []string{"explain", "-n", ns, "pod", ""}, nil},
		{"namespaces", []string{"get", "-n", ""}, []string{ns, "vision"}},
		// Fixed values come whole: the shell filters them by what is typed.
		{"dry-run values", []string{"repair", "ij245", "--dry-run="}, []string{"none", "client", "server"}},
		{"get outputs", []string{"get", "-o", "j"}, []string{"json", "yaml", "kyaml", "name", "go-template", "go-template-file", "template", "templatefile", "jsonpath", "jsonpath-as-json", "jsonpath-file", "wide", "custom-columns="}},
		{"completion shells", []string{"completion", ""}, []string{"bash", "fish", "powershell", "zsh"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, c, append([]string{"__complete"}, tc.args...)...)
			if code != options.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			// The last line is cobra's directive (":4" is no file completion).
			got := lines[:len(lines)-1]
			for i, l := range got {
				// Cobra's own completions carry descriptions; only the kinds' are ours to check.
				if tc.name != "kinds" {
					got[i], _, _ = strings.Cut(l, "\t")
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("completions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// ns is the namespace of the seed's objects.
const ns = clitest.Namespace

// run executes the whole plugin, as a shell's completion does, against c.
func run(t *testing.T, c client.Client, args ...string) (string, string, int) {
	t.Helper()
	return clitest.RunRoot(t, c, cli.NewCommand, args...)
}
