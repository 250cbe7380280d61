package acceptance

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
)

// seedRule is the rule of the seed account.
const seedRule = "result.valid == result.records && result.records > 0"

func report(records, valid int64, extra map[string]any) *result.Report {
	return &result.Report{Version: result.SchemaVersion, Shard: "s", InputRevision: "i", ModelRevision: "m", Digest: "d",
		Records: records, Valid: valid, Extra: extra}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name, rule string
		say        []string
	}{
		{"syntax error", "result.valid ==", []string{`"result.valid =="`, "does not compile", "Syntax error"}},
		{"not bool", "result.records + 1", []string{`"result.records + 1"`, "evaluates to int, not bool"}},
		{"string, not bool", "result.shard", []string{"evaluates to string"}},
		{"type error on a schema field", "result.records == 'many'", []string{"no matching overload", "(int, string)"}},
		{"undeclared variable", "results.valid > 0", []string{"undeclared reference to 'results'"}},
		{"too long", "true || " + strings.Repeat("true || ", MaxRuleLength/8) + "true", []string{"longer than"}},
		{"expensive: nested comprehensions over a large list literal",
			fmt.Sprintf("%[1]s.all(x, %[1]s.all(y, %[1]s.all(z, x + y + z >= 0)))", bigList(200)),
			[]string{"too expensive", "limit of 100000"}},
		{"expensive: nested comprehensions over reported lists",
			"result.items.all(x, result.items.all(y, x != y || x == y))",
			[]string{"too expensive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(tc.rule)
			if err == nil {
				t.Fatalf("Compile(%.60q) = %v, want an error", tc.rule, c)
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func bigList(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, i)
	}
	b.WriteByte(']')
	return b.String()
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name   string
		rule   string
		r      *result.Report
		reason string // "" when the result meets the rule
		say    string
	}{
		{"seed rule met", seedRule, report(10, 10, nil), "", ""},
		{"seed rule: some invalid records", seedRule, report(10, 9, nil), v1alpha1.RejectionCriterionNotMet, `(records=10, valid=9) does not meet the acceptance rule "` + seedRule + `"`},
		{"seed rule: no records", seedRule, report(0, 0, nil), v1alpha1.RejectionCriterionNotMet, seedRule},
		{"empty rule accepts", "", report(0, 0, nil), "", ""},
		{"blank rule accepts", "  ", report(0, 0, nil), "", ""},
		{"string fields", `result.digest.startsWith("d") && result.shard == "s" && result.output == ""`, report(1, 1, nil), "", ""},
		{"extra field", "result.retries < 3", report(1, 1, map[string]any{"retries": int64(2)}), "", ""},
		{"extra field not met", "result.retries < 3", report(1, 1, map[string]any{"retries": int64(5)}), v1alpha1.RejectionCriterionNotMet, "result.retries < 3"},
		{"extra float field", "result.durationSeconds < 900.0", report(1, 1, map[string]any{"durationSeconds": 812.5}), "", ""},
		{"extra bool field as the rule", "result.approved", report(1, 1, map[string]any{"approved": true}), "", ""},
		{"extra nested", `result.meta.host == "n1" && result.tags.exists(t, t == "gold")`,
			report(1, 1, map[string]any{"meta": map[string]any{"host": "n1"}, "tags": []any{"x", "gold"}}), "", ""},
		{"comprehension over a reported list", "result.checks.all(c, c.ok)",
			report(1, 1, map[string]any{"checks": []any{map[string]any{"ok": true}, map[string]any{"ok": false}}}), v1alpha1.RejectionCriterionNotMet, ""},
		{"has() guards an absent extra field", "!has(result.retries) || result.retries < 3", report(1, 1, nil), "", ""},
		{"absent extra field is an evaluation error", "result.retries < 3", report(1, 1, nil), v1alpha1.RejectionCriterionError, "no such key: retries"},
		{"extra field of the wrong type", "result.retries < 3", report(1, 1, map[string]any{"retries": "two"}), v1alpha1.RejectionCriterionError, "no such overload"},
		{"dyn rule yielding a non-bool", "result.approved", report(1, 1, map[string]any{"approved": "yes"}), v1alpha1.RejectionCriterionError, "not bool"},
		{"division by zero", "result.valid / result.records > 0", report(0, 0, nil), v1alpha1.RejectionCriterionError, "division by zero"},
		{"nil report", seedRule, nil, v1alpha1.RejectionCriterionError, "no result"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(tc.rule)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			ok, msg := c.Evaluate(tc.r)
			cerr := c.Check(tc.r)
			if tc.reason == "" {
				if !ok || msg != "" || cerr != nil {
					t.Fatalf("Evaluate = %v, %q; Check = %v; want it met", ok, msg, cerr)
				}
				return
			}
			if ok || msg == "" {
				t.Fatalf("Evaluate = %v, %q; want false with a message", ok, msg)
			}
			if cerr == nil || cerr.Reason != tc.reason || cerr.Message != msg {
				t.Fatalf("Check = %v; want %s with message %q", cerr, tc.reason, msg)
			}
			if !strings.Contains(msg, tc.say) {
				t.Errorf("message %q does not say %q", msg, tc.say)
			}
		})
	}
}

func TestNilCriterionAccepts(t *testing.T) {
	var c *Criterion
	if ok, msg := c.Evaluate(report(0, 0, nil)); !ok {
		t.Fatalf("nil criterion: %v %q", ok, msg)
	}
	if ok, _ := (&Criterion{}).Evaluate(report(0, 0, nil)); !ok {
		t.Fatal("zero criterion rejects")
	}
}

// TestRuntimeCostLimit proves evaluation stops at the cost limit even for a rule whose
// estimate was not checked: the rules below would take 10^7 to 10^9 steps.
func TestRuntimeCostLimit(t *testing.T) {
	items := make([]any, 1000)
	for i := range items {
		items[i] = int64(i)
	}
	r := report(1, 1, map[string]any{"items": items})
	for _, rule := range []string{
		fmt.Sprintf("%[1]s.all(x, %[1]s.all(y, %[1]s.all(z, x + y + z >= 0)))", bigList(300)),
		"result.items.all(x, result.items.all(y, result.items.all(z, x + y + z >= 0)))",
	} {
		for _, limit := range []uint64{1000, CostLimit} {
			c, err := compile(rule, limit, false)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ok, msg := c.Evaluate(r)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("limit %d: evaluation ran %v", limit, elapsed)
			}
			if ok || !strings.Contains(msg, "cost limit exceeded") || c.Check(r).Reason != v1alpha1.RejectionCriterionError {
				t.Errorf("limit %d: Evaluate = %v, %q; want a cost-limit CriterionError", limit, ok, msg)
			}
		}
		// The same rule through Compile is refused outright.
		if _, err := Compile(rule); err == nil || !strings.Contains(err.Error(), "too expensive") {
			t.Errorf("Compile = %v, want too expensive", err)
		}
	}
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	a1, err := c.Get(seedRule)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Get(seedRule)
	if a1 != a2 {
		t.Error("the same rule compiled twice")
	}
	if a1.Rule() != seedRule {
		t.Errorf("Rule() = %q", a1.Rule())
	}
	if _, err := c.Get("result.valid =="); err == nil {
		t.Error("a bad rule compiled")
	}
	if _, err := c.Get("result.valid =="); err == nil {
		t.Error("a cached bad rule lost its error")
	}
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
	// Touch the seed rule so the bad rule is least recently used, then overflow.
	_, _ = c.Get(seedRule)
	_, _ = c.Get("true")
	if c.Len() != 2 {
		t.Errorf("Len = %d, want the bound 2", c.Len())
	}
	if a3, _ := c.Get(seedRule); a3 != a1 {
		t.Error("the most recently used rule was evicted")
	}

	var zero Cache // usable without NewCache
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			rule := fmt.Sprintf("result.records > %d", i%8)
			crit, err := zero.Get(rule)
			if err != nil || crit.Rule() != rule {
				t.Errorf("Get(%q) = %v, %v", rule, crit, err)
			}
		})
	}
	wg.Wait()
	if zero.Len() != 8 {
		t.Errorf("Len = %d, want 8", zero.Len())
	}
}
