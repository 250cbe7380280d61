package acceptance

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"

	"batchledger.dev/batchledger/pkg/result"
)

// TestRuleLengthBound: a rule of exactly MaxRuleLength characters compiles, however many
// bytes they take (the CRD's MaxLength counts characters too); one character more is
// refused, saying how long it is.
func TestRuleLengthBound(t *testing.T) {
	// A string literal of multi-byte characters: 3 bytes each in UTF-8.
	multiByte := func(n int) string { return `result.shard != "` + strings.Repeat("€", n) + `"` }
	cases := map[string]struct {
		rule    string
		wantErr string
	}{
		"spaces, at the limit":     {rule: strings.Repeat(" ", MaxRuleLength-len(seedRule)) + seedRule},
		"spaces, one over":         {rule: strings.Repeat(" ", MaxRuleLength-len(seedRule)+1) + seedRule, wantErr: "acceptance rule is 4097 characters, longer than the 4096 allowed"},
		"multi-byte, at the limit": {rule: multiByte(MaxRuleLength - len(multiByte(0)))},
		"multi-byte, one over":     {rule: multiByte(MaxRuleLength - len(multiByte(0)) + 1), wantErr: "acceptance rule is 4097 characters, longer than the 4096 allowed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(tc.rule)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("a rule of %d characters (%d bytes): %v", utf8.RuneCountInString(tc.rule), len(tc.rule), err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("a rule of %d characters: %v; want %q", utf8.RuneCountInString(tc.rule), err, tc.wantErr)
			}
		})
	}
}

// TestResultTypeFieldNames: the result type declares exactly the schema fields to CEL;
// other types are the registry's.
func TestResultTypeFieldNames(t *testing.T) {
	reg, err := types.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	p := resultProvider{reg}
	names, ok := p.FindStructFieldNames(resultTypeName)
	slices.Sort(names)
	want := []string{result.FieldDigest, result.FieldInputRevision, result.FieldModelRevision, result.FieldOutput, result.FieldRecords, result.FieldShard, result.FieldValid, result.FieldVersion}
	slices.Sort(want)
	if !ok || !slices.Equal(names, want) {
		t.Errorf("result fields = %v, %v; want %v", names, ok, want)
	}
	if names, ok := p.FindStructFieldNames("no.such.Type"); ok || len(names) != 0 {
		t.Errorf("fields of an unknown type = %v, %v; want none", names, ok)
	}
}

// TestCostLimitBound: a rule whose estimated worst-case cost is exactly the limit
// compiles; under a limit one lower it is refused as too expensive.
func TestCostLimitBound(t *testing.T) {
	const rule = "result.items.all(x, x > 0)"
	e, err := env()
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := e.Compile(rule)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	est, err := e.EstimateCost(ast, sizeEstimator{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compile(rule, est.Max, true); err != nil {
		t.Errorf("at its estimated cost %d: %v", est.Max, err)
	}
	if _, err := compile(rule, est.Max-1, true); err == nil || !strings.Contains(err.Error(), "too expensive") {
		t.Errorf("under its estimated cost %d: %v; want too expensive", est.Max, err)
	}
}
