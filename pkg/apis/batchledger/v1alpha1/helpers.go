package v1alpha1

// RequiresResults is whether the account captures its workers' results at all
// (spec.acceptance.requireResults): only then are pods held for their results and
// messages recorded and judged.
func (s *BatchAccountSpec) RequiresResults() bool {
	return s.Acceptance != nil && s.Acceptance.RequireResults
}
