package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "batchledger.dev/batchledger/"

// deps lists every package pkg imports, directly or not, as `go list -deps` sees it.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// TestImportRules: each package stays clear of what its layer must not link.
func TestImportRules(t *testing.T) {
	var (
		client     = []string{"k8s.io/client-go/", "sigs.k8s.io/controller-runtime/..."}
		kubernetes = []string{"k8s.io/", "sigs.k8s.io/"}
		cel        = []string{"github.com/google/cel-go/..."}
		// The plugin's verbs: each a package, none importing another or the root command
		// that assembles them.
		verbs   = []string{"explain", "get", "watch", "mapview", "repair", "release", "version"}
		cliRoot = []string{module + "pkg/cli"}
	)
	// aboveKinds are the packages that ask the kinds: a kind imports none of them.
	aboveKinds := []string{module + "pkg/kinds/all/...", module + "pkg/relations/...", module + "pkg/controller/...", module + "pkg/webhook/...", module + "pkg/cli/...", module + "pkg/acceptance/..."}
	otherVerbs := func(verb string) []string {
		var out []string
		for _, v := range verbs {
			if v != verb {
				out = append(out, module+"pkg/cli/"+v+"/...")
			}
		}
		return out
	}
	allVerbs := otherVerbs("")
	join := func(sets ...[]string) []string {
		var out []string
		for _, s := range sets {
			out = append(out, s...)
		}
		return out
	}
	type rule struct {
		pkg string
		// forbidden are import paths: "x/" forbids everything under x/, "x/..." the
		// package x and everything under it, "x" the package x alone.
		forbidden []string
	}
	cases := []rule{
		{"pkg/indexset", join(kubernetes, cel, []string{module})},
		{"pkg/result", join(kubernetes, cel, []string{module})},
		{"pkg/worker", join(kubernetes, cel, []string{module + "pkg/account/...", module + "pkg/acceptance/...", module + "pkg/apis/..."})},
		{"cmd/example-worker", join(kubernetes, cel)},
		{"pkg/apis/batchledger/v1alpha1", join(client, cel, []string{module})},
		// The account reads kind-neutral facts (pkg/identity), never a kind's API types.
		{"pkg/account", join(client, cel, []string{module + "pkg/relations/...", module + "pkg/result/...", module + "pkg/acceptance/...", module + "pkg/kinds/...", "k8s.io/api/batch/", "sigs.k8s.io/jobset/...", "github.com/kubeflow/trainer/..."})},
		{"pkg/identity", join(client, cel, []string{module, "k8s.io/api/"})},
		// The seam knows no kind; a kind knows the seam, never who asks it or the registry.
		{"pkg/kinds", join(cel, []string{module + "pkg/kinds/", module + "pkg/relations/...", module + "pkg/controller/...", module + "pkg/webhook/...", module + "pkg/cli/...", module + "pkg/account/..."})},
		{"pkg/kinds/job", join(cel, aboveKinds)},
		{"pkg/kinds/jobset", join(cel, aboveKinds)},
		{"pkg/kinds/trainjob", join(cel, aboveKinds)},
		{"pkg/relations", []string{module + "pkg/controller/...", module + "pkg/webhook/...", module + "pkg/cli/...", module + "pkg/acceptance/...", "github.com/google/cel-go/..."}},
		{"pkg/webhook", []string{module + "pkg/controller/...", module + "pkg/cli/..."}},
		{"pkg/cli", []string{module + "pkg/controller/...", module + "pkg/webhook/..."}},
		// What the verbs share imports no verb. The explanation model and the printing
		// helpers read objects they are given: they link no API client.
		{"pkg/cli/options", join(cliRoot, allVerbs)},
		{"pkg/cli/resolve", join(cliRoot, allVerbs)},
		{"pkg/cli/completion", join(cliRoot, allVerbs)},
		{"pkg/cli/explanation", join(client, cliRoot, allVerbs)},
		{"pkg/cli/internal/output", join(client, []string{module})},
	}
	for _, v := range verbs {
		cases = append(cases, rule{"pkg/cli/" + v, join(cliRoot, otherVerbs(v), []string{module + "pkg/controller/...", module + "pkg/webhook/..."})})
	}
	for _, tc := range cases {
		t.Run(tc.pkg, func(t *testing.T) {
			for _, dep := range deps(t, tc.pkg) {
				if dep == module+tc.pkg {
					continue
				}
				for _, f := range tc.forbidden {
					if matches(dep, f) {
						t.Errorf("%s links %s (nothing under %s allowed)", tc.pkg, dep, f)
					}
				}
			}
		})
	}
}

// matches says whether the import path dep is what pattern forbids: everything under it
// when it ends in "/", the package and everything under it when it ends in "/...", the
// package alone otherwise.
func matches(dep, pattern string) bool {
	switch {
	case strings.HasSuffix(pattern, "/"):
		return strings.HasPrefix(dep, pattern)
	case strings.HasSuffix(pattern, "/..."):
		pkg := strings.TrimSuffix(pattern, "/...")
		return dep == pkg || strings.HasPrefix(dep, pkg+"/")
	}
	return dep == pattern
}
