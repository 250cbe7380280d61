// Package acceptance reads the shard result a worker reported from its pod and judges
// it: FromPod finds the result container's termination message, decodes it in the
// message format of pkg/result and evaluates the account's acceptance rule (a CEL
// expression, compiled once per rule text by Cache), giving the account.Result the
// account core then checks against the assignment and the revisions. The worker side
// never links this package: it needs only pkg/result.
//
// # Where the result is read
//
// The result is read from the container the account's spec.acceptance.resultContainer
// names, else the pod annotation batchledger.dev/result-container
// (v1alpha1.AnnotationResultContainer), else the pod annotation
// kubectl.kubernetes.io/default-container, else from the pod's first container, and
// only once the pod has Succeeded: a failed or running pod has not completed its index,
// whatever it wrote.
//
// # Acceptance rule
//
// An account may declare spec.acceptance.rule, a CEL expression over the variable
// result that must evaluate to true, e.g.
//
//	result.valid == result.records && result.records > 0
//
// result.version, result.shard, result.inputRevision, result.modelRevision,
// result.output and result.digest are strings, result.records and result.valid are
// ints, and other reported fields are dynamically typed (test with has(result.name)
// before using a field a worker may omit: reading an absent field fails the
// evaluation, recorded as CriterionError). A rule may be a bare reported boolean such
// as result.approved; a non-bool value at run time is a CriterionError. Rules are
// cost-limited (CostLimit): a rule whose worst case exceeds the limit, such as nested
// comprehensions over reported lists, is refused when the account is admitted, and
// evaluation stops at the limit in any case.
package acceptance
