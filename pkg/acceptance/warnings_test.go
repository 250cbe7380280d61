package acceptance

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWarnings: a rule reading a field the result schema does not declare, without a
// has() test of it, is warned of, with the schema field it may have meant.
func TestWarnings(t *testing.T) {
	cases := []struct {
		name string
		rule string
		want []string
	}{
		{name: "schema fields only", rule: "result.valid == result.records && result.records > 0"},
		{name: "empty rule", rule: ""},
		{name: "does not compile: Compile says why", rule: "result.valid =="},
		{
			name: "a misspelt schema field",
			rule: "result.valid == result.record && result.records > 0",
			want: []string{`rule reads result.record, not a result schema field (did you mean result.records?): a result without it fails the rule unless it tests has(result.record)`},
		},
		{
			name: "an extra field, read without has()",
			rule: "result.approved == true",
			want: []string{`rule reads result.approved, not a result schema field: a result without it fails the rule unless it tests has(result.approved)`},
		},
		{name: "an extra field tested with has()", rule: "has(result.approved) && result.approved == true"},
		{
			name: "each field once, in order",
			rule: "result.zeta == 1 && result.alpha == 2 && result.zeta == 3",
			want: []string{
				`rule reads result.alpha, not a result schema field: a result without it fails the rule unless it tests has(result.alpha)`,
				`rule reads result.zeta, not a result schema field: a result without it fails the rule unless it tests has(result.zeta)`,
			},
		},
		{name: "a field of a nested value is not the result's", rule: "has(result.extra) && result.extra.anything == 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Warnings(tc.rule)); diff != "" {
				t.Errorf("Warnings(%q) (-want +got):\n%s", tc.rule, diff)
			}
		})
	}
}
