package acceptance

import (
	"container/list"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
)

// CostLimit bounds the work one evaluation of an acceptance rule may do, in CEL cost
// units (roughly one per operation, more for string and list work). A rule is evaluated
// once per reported result inside the controller's reconcile, so its cost must be
// bounded no matter what a worker reports; Compile refuses rules whose worst case
// exceeds it and evaluation stops when it is reached.
const CostLimit = 100_000

// MaxRuleLength is the longest rule accepted, in characters (Unicode code points, as the
// CRD's MaxLength on spec.acceptance.rule and CEL's parser count them), so that a rule
// admitted by the API server also compiles here.
const MaxRuleLength = 4096

// resultTypeName is the CEL type of the `result` variable. A declared object type,
// rather than map(string, dyn), lets the checker know the schema fields' types: a rule
// comparing result.records with a string, or one that yields an int, is refused at
// admission instead of failing on every result.
const resultTypeName = "batchledger.dev.v1.Result"

// schemaFieldTypes are the CEL types of the schema fields; any other field is dyn.
var schemaFieldTypes = map[string]*types.Type{
	result.FieldVersion: types.StringType, result.FieldShard: types.StringType, result.FieldInputRevision: types.StringType,
	result.FieldModelRevision: types.StringType, result.FieldOutput: types.StringType, result.FieldDigest: types.StringType,
	result.FieldRecords: types.IntType, result.FieldValid: types.IntType,
}

// resultProvider declares the result object type to the checker: the schema fields with
// their types and any other name as dyn, since a worker may report extra fields. At run
// time the value is a map[string]any, which CEL's field selection reads by key; a rule
// reading an extra field the result lacks fails with "no such key" (use has()).
type resultProvider struct {
	*types.Registry
}

func (p resultProvider) FindStructType(name string) (*types.Type, bool) {
	if name == resultTypeName {
		return types.NewTypeTypeWithParam(types.NewObjectType(resultTypeName)), true
	}
	return p.Registry.FindStructType(name)
}

func (p resultProvider) FindStructFieldNames(name string) ([]string, bool) {
	if name == resultTypeName {
		names := make([]string, 0, len(schemaFieldTypes))
		for n := range schemaFieldTypes {
			names = append(names, n)
		}
		return names, true
	}
	return p.Registry.FindStructFieldNames(name)
}

func (p resultProvider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if name == resultTypeName {
		if t, ok := schemaFieldTypes[field]; ok {
			return &types.FieldType{Type: t}, true
		}
		return &types.FieldType{Type: types.DynType}, true
	}
	return p.Registry.FindStructFieldType(name, field)
}

// env is the shared CEL environment; building one is far more expensive than compiling
// a rule, and it is immutable once built.
var env = sync.OnceValues(func() (*cel.Env, error) {
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, err
	}
	return cel.NewEnv(
		cel.CustomTypeProvider(resultProvider{reg}),
		cel.Variable("result", cel.ObjectType(resultTypeName)),
		cel.ParserExpressionSizeLimit(MaxRuleLength),
	)
})

// sizeEstimator tells the cost estimator how large a value taken from a result can be:
// no string, list or map in a message exceeds the message, which is under
// result.MaxMessageBytes. Without it every comprehension over a reported list would estimate
// as unbounded and be refused.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: result.MaxMessageBytes}
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Criterion is a compiled acceptance rule. It is immutable and safe for concurrent use.
// The zero value and a nil *Criterion accept every result, like an empty rule.
type Criterion struct {
	rule string
	prg  cel.Program
}

// Rule returns the rule text the criterion was compiled from.
func (c *Criterion) Rule() string {
	if c == nil {
		return ""
	}
	return c.rule
}

// Compile compiles an acceptance rule: a CEL expression over the variable `result` (see
// the package doc) that evaluates to bool. An empty rule gives a Criterion that accepts
// every result. The error names the rule and says what is wrong; the admission webhook
// shows it to the user as is. A rule whose estimated worst-case cost exceeds CostLimit
// is refused, and evaluation is cut off at CostLimit in any case.
func Compile(rule string) (*Criterion, error) {
	return compile(rule, CostLimit, true)
}

// compile lets tests build a criterion whose estimate is not checked, to prove that the
// run-time limit stops it.
func compile(rule string, limit uint64, checkEstimate bool) (*Criterion, error) {
	if strings.TrimSpace(rule) == "" {
		return &Criterion{rule: rule}, nil
	}
	if n := utf8.RuneCountInString(rule); n > MaxRuleLength {
		return nil, fmt.Errorf("acceptance rule is %d characters, longer than the %d allowed", n, MaxRuleLength)
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("acceptance rule %q: building the CEL environment: %w", rule, err)
	}
	ast, iss := e.CompileSource(common.NewStringSource(rule, "rule"))
	if iss.Err() != nil {
		return nil, fmt.Errorf("acceptance rule %q does not compile: %s", rule, iss.Err())
	}
	switch t := ast.OutputType(); {
	case t.IsExactType(types.BoolType):
	case t.IsExactType(types.DynType):
		// e.g. `result.approved`, an extra field: its type is known only at run time,
		// where a non-bool value is a CriterionError.
	default:
		return nil, fmt.Errorf("acceptance rule %q evaluates to %s, not bool: it must be true for a result to be accepted, e.g. %q", rule, t, "result.valid == result.records && result.records > 0")
	}
	if checkEstimate {
		est, err := e.EstimateCost(ast, sizeEstimator{})
		if err != nil {
			return nil, fmt.Errorf("acceptance rule %q: estimating its cost: %w", rule, err)
		}
		if est.Max > limit {
			return nil, fmt.Errorf("acceptance rule %q is too expensive: its worst-case cost is estimated at %d, over the limit of %d (nested comprehensions over large lists multiply); simplify it", rule, est.Max, limit)
		}
	}
	prg, err := e.Program(ast, cel.CostLimit(limit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("acceptance rule %q: %w", rule, err)
	}
	return &Criterion{rule: rule, prg: prg}, nil
}

// Evaluate applies the criterion to r. It returns true when r meets the rule; otherwise
// false and a message, quoting the rule, that says whether the rule was false or could
// not be evaluated (Check tells the two apart by reason).
func (c *Criterion) Evaluate(r *result.Report) (ok bool, msg string) {
	if err := c.Check(r); err != nil {
		return false, err.Message
	}
	return true, ""
}

// Check applies the criterion to r and returns nil when r meets it, or a *result.Error
// with v1alpha1.RejectionCriterionNotMet when the rule is false and
// v1alpha1.RejectionCriterionError when it could not be evaluated (a run-time error, a
// non-bool value, or the cost limit).
func (c *Criterion) Check(r *result.Report) *result.Error {
	if r == nil {
		return rejectf(v1alpha1.RejectionCriterionError, "there is no result to evaluate the acceptance rule on")
	}
	if c == nil || c.prg == nil {
		return nil
	}
	out, _, err := c.prg.Eval(map[string]any{"result": r.Fields()})
	if err != nil {
		return rejectf(v1alpha1.RejectionCriterionError, "evaluating acceptance rule %q: %v", c.rule, err)
	}
	b, isBool := out.Value().(bool)
	switch {
	case !isBool:
		return rejectf(v1alpha1.RejectionCriterionError, "acceptance rule %q evaluated to %v (%s), not bool", c.rule, out.Value(), out.Type())
	case !b:
		return rejectf(v1alpha1.RejectionCriterionNotMet, "the result (records=%d, valid=%d) does not meet the acceptance rule %q", r.Records, r.Valid, c.rule)
	}
	return nil
}

// DefaultCacheSize is the number of rules a zero Cache keeps compiled.
const DefaultCacheSize = 256

// Cache keeps compiled criteria by rule text, so that each reconcile of an account does
// not recompile its rule: keying by text rather than by (account UID, generation) shares
// one compilation among accounts with the same rule and needs no invalidation when a
// spec changes. Compile errors are cached too, since compiling is deterministic. It is
// safe for concurrent use and bounded: past its size the least recently used rule is
// dropped. The zero value is ready to use with DefaultCacheSize.
type Cache struct {
	mu      sync.Mutex
	size    int
	order   *list.List // of *cacheEntry, most recently used first
	entries map[string]*list.Element
}

type cacheEntry struct {
	rule string
	crit *Criterion
	err  error
}

// NewCache returns a Cache that keeps at most size compiled rules (DefaultCacheSize
// when size <= 0).
func NewCache(size int) *Cache {
	return &Cache{size: size}
}

// Get returns the compiled criterion of rule, compiling it on first use. Two callers
// asking for a new rule at once may both compile it; the cache keeps one.
func (c *Cache) Get(rule string) (*Criterion, error) {
	c.mu.Lock()
	if el, ok := c.entries[rule]; ok {
		c.order.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		c.mu.Unlock()
		return e.crit, e.err
	}
	c.mu.Unlock()

	// Compile outside the lock: it takes far longer than a lookup.
	crit, err := Compile(rule)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*list.Element{}
		c.order = list.New()
	}
	if el, ok := c.entries[rule]; ok {
		c.order.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		return e.crit, e.err
	}
	c.entries[rule] = c.order.PushFront(&cacheEntry{rule: rule, crit: crit, err: err})
	limit := c.size
	if limit <= 0 {
		limit = DefaultCacheSize
	}
	for c.order.Len() > limit {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).rule)
	}
	return crit, err
}

// Len returns the number of rules cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// rejectf is a rejection of reason with a formatted message.
func rejectf(reason, format string, args ...any) *result.Error {
	return &result.Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}
