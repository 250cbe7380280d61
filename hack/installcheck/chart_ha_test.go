package installcheck

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// TestChartHA renders the chart for highly available shapes and checks the pieces that
// keep them safe: the PodDisruptionBudget (only with more than one replica, minAvailable
// 1, selecting exactly this release's manager pods), the leader-election timing and
// concurrency flags (the lease flags only when leader election is on), the scope
// webhook's live reads (only with more than one replica), that helm lint
// --strict accepts those shapes, and that values.schema.json refuses bad values with an
// error naming the key.
func TestChartHA(t *testing.T) {
	root, tools := setup(t)
	chart := filepath.Join(root, "charts", "batchledger")
	lease := []string{"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period"}
	for _, c := range []struct {
		name      string
		set       []string
		wantPDB   bool
		wantFlags map[string]string // "" for a flag that must be absent
	}{
		{
			name: "replicas=2, timing set",
			set: []string{"replicas=2", "leaderElection.leaseDuration=30s", "leaderElection.renewDeadline=20s",
				"leaderElection.retryPeriod=1500ms", "controller.concurrentAccountSyncs=8",
				"controller.kubeAPIQPS=250.5", "controller.kubeAPIBurst=500"},
			wantPDB: true,
			wantFlags: map[string]string{"leader-elect": "true", "leader-elect-lease-duration": "30s",
				"leader-elect-renew-deadline": "20s", "leader-elect-retry-period": "1500ms", "concurrent-account-syncs": "8",
				"kube-api-qps": "250.5", "kube-api-burst": "500", "scope-live-reads": "true"},
		},
		{
			name:    "replicas=3, cert-manager, defaults",
			set:     []string{"replicas=3", "webhook.certMode=certManager"},
			wantPDB: true,
			wantFlags: map[string]string{"leader-elect": "true", "leader-elect-lease-duration": "15s",
				"leader-elect-renew-deadline": "10s", "leader-elect-retry-period": "2s", "concurrent-account-syncs": "5",
				"kube-api-qps": "100", "kube-api-burst": "200", "scope-live-reads": "true"},
		},
		{
			name:      "replicas=1",
			set:       []string{"replicas=1"},
			wantPDB:   false,
			wantFlags: map[string]string{"leader-elect": "true", "leader-elect-lease-duration": "15s", "scope-live-reads": ""},
		},
		{
			name:    "replicas=2, podDisruptionBudget.enabled=false",
			set:     []string{"replicas=2", "podDisruptionBudget.enabled=false"},
			wantPDB: false,
		},
		{
			name:    "one replica without leader election",
			set:     []string{"leaderElection.enabled=false", "leaderElection.leaseDuration=1m"},
			wantPDB: false,
			wantFlags: map[string]string{"leader-elect": "false", "leader-elect-lease-duration": "",
				"leader-elect-renew-deadline": "", "leader-elect-retry-period": "", "concurrent-account-syncs": "5"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := tools.RenderChart(chart, c.set...)
			if err != nil {
				t.Fatal(err)
			}
			d := deployment(t, h)
			args := d.Spec.Template.Spec.Containers[0].Args
			given := map[string][]string{}
			for _, a := range args {
				name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				given[name] = append(given[name], value)
			}
			for name, want := range c.wantFlags {
				switch got := given[name]; {
				case want == "" && len(got) > 0:
					t.Errorf("--%s=%v is passed; want it absent", name, got)
				case want != "" && (len(got) != 1 || got[0] != want):
					t.Errorf("--%s is %v, want exactly [%s] (args %q)", name, got, want, args)
				}
			}
			if c.wantFlags["leader-elect"] == "true" {
				for _, name := range lease {
					if len(given[name]) != 1 {
						t.Errorf("leader election is on, --%s is passed %d times", name, len(given[name]))
					}
				}
			}

			pdbs := h.Of("PodDisruptionBudget")
			if !c.wantPDB {
				if len(pdbs) != 0 {
					t.Errorf("%d PodDisruptionBudgets rendered with %d replica(s), want none", len(pdbs), *d.Spec.Replicas)
				}
			} else {
				if len(pdbs) != 1 {
					t.Fatalf("%d PodDisruptionBudgets rendered, want 1", len(pdbs))
				}
				var pdb policyv1.PodDisruptionBudget
				if err := Into(pdbs[0], &pdb); err != nil {
					t.Fatal(err)
				}
				checkPDB(t, tools, chart, &pdb, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels, c.set)
			}

			// The shape passes the same strict lint as the defaults in `make helm-lint`.
			args = []string{"lint", "--strict", chart}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			if _, err := run(tools.Helm, args...); err != nil {
				t.Error(err)
			}
		})
	}

	// The schema refuses what the manager would not run with, at both entry points:
	// helm template (as helm install) and helm lint --strict must fail, and helm's own
	// output (not the command line echoed) must name the offending key.
	for _, c := range []struct {
		name string
		set  string
		want string // the key the error must name, dotted
	}{
		{"unknown top-level key", "replicaCount=2", "replicaCount"},
		{"unknown nested key", "leaderElection.leaseDurration=15s", "leaderElection.leaseDurration"},
		{"bad cert mode", "webhook.certMode=vault", "webhook.certMode"},
		{"port 70000", "metrics.port=70000", "metrics.port"},
		{"port 0", "webhook.port=0", "webhook.port"},
		{"duration in words", "leaderElection.leaseDuration=ten seconds", "leaderElection.leaseDuration"},
		{"duration without unit", "leaderElection.retryPeriod=2", "leaderElection.retryPeriod"},
		{"no lease duration", "leaderElection.leaseDuration=0s", "leaderElection.leaseDuration"},
		{"no renew deadline", "leaderElection.renewDeadline=0.0ms", "leaderElection.renewDeadline"},
		{"no retry period", "leaderElection.retryPeriod=0s", "leaderElection.retryPeriod"},
		{"a negative retry period", "leaderElection.retryPeriod=-2s", "leaderElection.retryPeriod"},
		{"no replicas", "replicas=0", "replicas"},
		{"no concurrent syncs", "controller.concurrentAccountSyncs=0", "controller.concurrentAccountSyncs"},
		{"zero API QPS", "controller.kubeAPIQPS=0", "controller.kubeAPIQPS"},
		{"API QPS in words", "controller.kubeAPIQPS=fast", "controller.kubeAPIQPS"},
		{"API QPS 0.0", "controller.kubeAPIQPS=0.0", "controller.kubeAPIQPS"},
		{"a fractional API burst", "controller.kubeAPIBurst=2.5", "controller.kubeAPIBurst"},
		{"bad log level", "logLevel=verbose", "logLevel"},
		{"issuerRef without a name", "webhook.certManager.issuerRef.kind=ClusterIssuer", "webhook.certManager.issuerRef"},
		{"the removed webhook.pod.namespaceSelector", "webhook.pod.namespaceSelector.matchLabels.team=ml", "webhook.pod"},
		{"a misspelt namespaceSelector field", "webhook.namespaceSelector.matchLabel.team=ml", "webhook.namespaceSelector.matchLabel"},
		{"a namespaceSelector operator", "webhook.namespaceSelector.matchExpressions[0].key=team,webhook.namespaceSelector.matchExpressions[0].operator=Equals", "webhook.namespaceSelector.matchExpressions.0.operator"},
		{"releaseHeldPods not a boolean", "uninstall.releaseHeldPods=sometimes", "uninstall.releaseHeldPods"},
	} {
		t.Run("schema refuses "+c.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"template", Release, chart, "--namespace", Namespace, "--set", c.set},
				{"lint", "--strict", chart, "--set", c.set},
			} {
				out, err := exec.Command(tools.Helm, args...).CombinedOutput()
				if err == nil {
					t.Errorf("helm %s accepts --set %q:\n%.300s", args[0], c.set, out)
					continue
				}
				if _, exited := err.(*exec.ExitError); !exited {
					t.Fatal(err)
				}
				if !namesKey(string(out), c.want) {
					t.Errorf("helm %s refuses --set %q without naming %s:\n%s", args[0], c.set, c.want, out)
				}
			}
		})
	}
}

// checkPDB: minAvailable 1 (one replica leads and any one serves the webhooks), in the
// Deployment's namespace, selecting by exactly the Deployment's own selector, so its
// pods and no one else's: not the pods of another release of the chart in the same
// namespace, and not every pod (an empty selector would select them all).
func checkPDB(t *testing.T, tools Tools, chart string, pdb *policyv1.PodDisruptionBudget, deploySelector, podLabels map[string]string, set []string) {
	t.Helper()
	if pdb.Namespace != Namespace {
		t.Errorf("PodDisruptionBudget is in namespace %q, want %q", pdb.Namespace, Namespace)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "1" || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget minAvailable %v, maxUnavailable %v; want minAvailable 1 alone", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
	}
	sel := pdb.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) != 0 {
		t.Fatalf("PodDisruptionBudget selector %s: want matchLabels only, not empty", jsonString(sel))
	}
	if fmt.Sprint(sel.MatchLabels) != fmt.Sprint(deploySelector) {
		t.Errorf("PodDisruptionBudget selects %v, the Deployment %v", sel.MatchLabels, deploySelector)
	}
	if !labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(podLabels)) {
		t.Errorf("PodDisruptionBudget selector %v does not select the manager pods %v", sel.MatchLabels, podLabels)
	}
	args := []string{"template", "other", chart, "--namespace", Namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := run(tools.Helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if od := deployment(t, other); labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(od.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget %s also selects the pods of release %q: %v", pdb.Name, "other", od.Spec.Template.Labels)
	}
}

// namesKey reports whether a schema error names the dotted values key: by its JSON
// pointer, as helm's validator reports a bad value (at '/metrics/port') or an unknown key
// (at '/leaderElection': additional properties 'leaseDurration'), or by the dotted path
// older helm releases print.
func namesKey(msg, key string) bool {
	pointer := func(k string) string {
		if k == "" {
			return "''"
		}
		return "'/" + strings.ReplaceAll(k, ".", "/") + "'"
	}
	parent, last := "", key
	if i := strings.LastIndex(key, "."); i >= 0 {
		parent, last = key[:i], key[i+1:]
	}
	return strings.Contains(msg, pointer(key)) ||
		strings.Contains(msg, "at "+pointer(parent)) && strings.Contains(msg, "'"+last+"'") ||
		strings.Contains(key, ".") && strings.Contains(msg, key)
}

// TestChartSchemaCoversValues checks values.schema.json against values.yaml without
// helm: every object level of the schema states additionalProperties (false, or the
// schema of a map's values, or an explicit true where the API server validates), and
// every key of values.yaml has a schema, so that a value added to values.yaml without
// its schema entry fails here with its full path, even where helm is not built.
func TestChartSchemaCoversValues(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "charts", "batchledger")
	b, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema["$schema"]; got != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema is %v, want draft-07", got)
	}
	defs, _ := schema["definitions"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		for {
			ref, ok := s["$ref"].(string)
			if !ok {
				return s
			}
			name, ok := strings.CutPrefix(ref, "#/definitions/")
			d, found := defs[name].(map[string]any)
			if !ok || !found {
				t.Fatalf("unresolvable $ref %q", ref)
			}
			s = d
		}
	}
	var open []string
	var walk func(at string, s map[string]any)
	walk = func(at string, s map[string]any) {
		s = resolve(s)
		if s["type"] == "object" {
			if _, ok := s["additionalProperties"]; !ok {
				open = append(open, at)
			}
		}
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			walk(at+"."+k, p.(map[string]any))
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			walk(at+".*", ap)
		}
		if it, ok := s["items"].(map[string]any); ok {
			walk(at+"[]", it)
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			alts, _ := s[k].([]any)
			for i, a := range alts {
				walk(fmt.Sprintf("%s(%s %d)", at, k, i), a.(map[string]any))
			}
		}
	}
	walk("", schema)
	sort.Strings(open)
	for _, at := range open {
		t.Errorf("schema object %s does not state additionalProperties", at)
	}

	vb, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	var cover func(at string, v any, s map[string]any)
	cover = func(at string, v any, s map[string]any) {
		s = resolve(s)
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		props, _ := s["properties"].(map[string]any)
		for k, sub := range m {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if ap, isMap := s["additionalProperties"].(map[string]any); isMap {
					cover(at+"."+k, sub, ap)
					continue
				}
				t.Errorf("values.yaml key %s%s has no schema", at, "."+k)
				continue
			}
			cover(at+"."+k, sub, ps)
		}
	}
	cover("", values, schema)
}

// TestChartManagerDefaults checks managerDefaults against cmd/batchledger/main.go's flag
// definitions, read from its syntax tree: TestChartAgreesWithKustomize equates a flag the
// chart passes with config/default relying on its default only through that table, so a
// default changed in main.go (say the lease duration) must show up here rather than let
// the chart and config/default run the manager differently unnoticed.
func TestChartManagerDefaults(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "cmd", "batchledger", "main.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 3 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		// flag.XxxVar, or fs.XxxVar on the FlagSet bindFlags registers on.
		if x, isIdent := sel.X.(*ast.Ident); !isIdent || (x.Name != "flag" && x.Name != "fs") {
			return true
		}
		name, ok := call.Args[1].(*ast.BasicLit)
		if !ok || name.Kind != token.STRING {
			return true
		}
		flagName, _ := strconv.Unquote(name.Value)
		if v, ok := literalDefault(sel.Sel.Name, call.Args[2]); ok {
			defaults[flagName] = v
		}
		return true
	})
	checked := 0
	for name, want := range managerDefaults {
		got, ok := defaults[name]
		if !ok {
			continue // a default that is not a literal (certs.Default*): compared by name elsewhere
		}
		checked++
		if got != want {
			t.Errorf("--%s defaults to %q in cmd/batchledger/main.go, managerDefaults says %q", name, got, want)
		}
	}
	for _, name := range []string{"leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period", "concurrent-account-syncs", "kube-api-qps", "kube-api-burst", "workload-message-interval", "waiting-status-delay"} {
		if _, ok := defaults[name]; !ok {
			t.Errorf("no literal default for --%s found in cmd/batchledger/main.go", name)
		}
	}
	t.Logf("%d flag defaults compared", checked)
}

// literalDefault evaluates a flag's default written as a literal: "s", 5, true, 100 or
// 2.5 for a float64, or N*time.Unit for a duration, in the form the flag package prints
// it.
func literalDefault(fn string, e ast.Expr) (string, bool) {
	switch fn {
	case "Float64Var":
		// The flag package prints a float64 with strconv.FormatFloat(v, 'g', -1, 64).
		if lit, ok := e.(*ast.BasicLit); ok && (lit.Kind == token.INT || lit.Kind == token.FLOAT) {
			f, err := strconv.ParseFloat(lit.Value, 64)
			return strconv.FormatFloat(f, 'g', -1, 64), err == nil
		}
	case "StringVar", "IntVar", "BoolVar":
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
			return e.Value, e.Kind == token.INT
		case *ast.Ident:
			return e.Name, e.Name == "true" || e.Name == "false"
		}
	case "DurationVar":
		units := map[string]time.Duration{"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond,
			"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}
		b, ok := e.(*ast.BinaryExpr)
		if !ok || b.Op != token.MUL {
			return "", false
		}
		n, ok := b.X.(*ast.BasicLit)
		u, ok2 := b.Y.(*ast.SelectorExpr)
		if !ok || !ok2 || n.Kind != token.INT {
			return "", false
		}
		count, err := strconv.Atoi(n.Value)
		unit, known := units[u.Sel.Name]
		if err != nil || !known {
			return "", false
		}
		return (time.Duration(count) * unit).String(), true
	}
	return "", false
}

// TestChartMonitoringNeedsMetrics: the dashboard and the alerts read batchledger's
// metrics; with metrics off the chart refuses them rather than install alerts that fire
// for want of data, and renders them with metrics on.
func TestChartMonitoringNeedsMetrics(t *testing.T) {
	root, tools := setup(t)
	chart := filepath.Join(root, "charts", "batchledger")
	for _, set := range [][]string{
		{"metrics.enabled=false", "monitoring.prometheusRule.enabled=true"},
		{"metrics.enabled=false", "monitoring.dashboard.enabled=true"},
	} {
		if _, err := tools.RenderChart(chart, set...); err == nil || !strings.Contains(err.Error(), "set metrics.enabled=true") {
			t.Errorf("--set %v: error %v, want one asking for metrics.enabled=true", set, err)
		}
	}
	objs, err := tools.RenderChart(chart, "monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	if !kinds["PrometheusRule"] || !kinds["ConfigMap"] {
		t.Errorf("rendered kinds %v, want the PrometheusRule and the dashboard's ConfigMap", kinds)
	}
}
