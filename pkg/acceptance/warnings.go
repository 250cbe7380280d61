package acceptance

import (
	"fmt"
	"maps"
	"slices"

	"github.com/google/cel-go/common"
	celast "github.com/google/cel-go/common/ast"
)

// Warnings are what a person writing rule should hear before it judges any result,
// though the rule compiles: each field of `result` the rule reads that the result schema
// does not declare and that the rule never tests with has(). A worker may report extra
// fields, so such a rule is valid; but a result without the field fails it with "no such
// key", and a misspelt schema field ("result.record") fails every result, after which the
// rule is frozen with the first one recorded. A rule that does not compile has none
// (Compile says why).
func Warnings(rule string) []string {
	e, err := env()
	if err != nil {
		return nil
	}
	ast, iss := e.CompileSource(common.NewStringSource(rule, "rule"))
	if iss.Err() != nil {
		return nil
	}
	read, tested := map[string]bool{}, map[string]bool{}
	celast.PreOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(x celast.Expr) {
		if x.Kind() != celast.SelectKind {
			return
		}
		sel := x.AsSelect()
		if op := sel.Operand(); op.Kind() != celast.IdentKind || op.AsIdent() != "result" {
			return
		}
		if sel.IsTestOnly() {
			tested[sel.FieldName()] = true
		} else {
			read[sel.FieldName()] = true
		}
	}))
	var out []string
	for _, f := range slices.Sorted(maps.Keys(read)) {
		if _, ok := schemaFieldTypes[f]; ok || tested[f] {
			continue
		}
		meant := ""
		if near := nearestSchemaField(f); near != "" {
			meant = fmt.Sprintf(" (did you mean result.%s?)", near)
		}
		out = append(out, fmt.Sprintf("rule reads result.%s, not a result schema field%s: a result without it fails the rule unless it tests has(result.%s)", f, meant, f))
	}
	return out
}

// nearestSchemaField is the schema field within two edits of name ("" when none is).
func nearestSchemaField(name string) string {
	best, bestDist := "", 3
	for _, f := range slices.Sorted(maps.Keys(schemaFieldTypes)) {
		if d := editDistance(name, f); d < bestDist {
			best, bestDist = f, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
