package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// RequiresResults is whether the account captures its workers' results at all
// (spec.acceptance.requireResults): only then are pods held for their results and
// messages recorded and judged.
func (s *BatchAccountSpec) RequiresResults() bool {
	return s.Acceptance != nil && s.Acceptance.RequireResults
}

// AcceptanceRule is the spec's acceptance rule ("" for none: every result that decodes
// and claims its shard is accepted).
func (s *BatchAccountSpec) AcceptanceRule() string {
	if s.Acceptance == nil {
		return ""
	}
	return s.Acceptance.Rule
}

// RuleDigest identifies an acceptance rule text: the first 128 bits of the text's
// SHA-256, in hex. It is what RecordedResult.RuleDigest held before results recorded
// their ResultDigest; such a result is taken as read from the container the spec names
// (Judging.Judged).
func RuleDigest(rule string) string {
	sum := sha256.Sum256([]byte(rule))
	return hex.EncodeToString(sum[:16])
}

// resultDigestPrefix tells a ResultDigest from a RuleDigest.
const resultDigestPrefix = "rc-"

// ResultDigest identifies, in RecordedResult.RuleDigest, everything in the spec that
// decides a result's verdict: the acceptance rule text and the container the result is
// read from (spec.acceptance.resultContainer, "" for the default), as "rc-" and the first
// 128 bits of their SHA-256, in hex. A result carries it so that the account can tell a
// result judged under another rule, or read from another container, from one judged
// under the spec's, without storing a rule of up to 4096 bytes with every result.
func ResultDigest(rule, resultContainer string) string {
	// A container name holds no NUL: the last one separates the two unambiguously.
	sum := sha256.Sum256([]byte(rule + "\x00" + resultContainer))
	return resultDigestPrefix + hex.EncodeToString(sum[:16])
}

// ResultDigest is ResultDigest of the spec's acceptance rule and result container: what
// a result judged under the spec records.
func (s *BatchAccountSpec) ResultDigest() string {
	if s.Acceptance == nil {
		return ResultDigest("", "")
	}
	return ResultDigest(s.Acceptance.Rule, s.Acceptance.ResultContainer)
}

// Judging holds the digests a result judged under a spec may have recorded in
// RecordedResult.RuleDigest (BatchAccountSpec.Judging), computed once for the many
// results an account or a chunk holds.
//
// +kubebuilder:object:generate=false
type Judging struct{ result, rule string }

// Judging gives the digests of what judges the spec's results.
func (s *BatchAccountSpec) Judging() Judging {
	return Judging{result: s.ResultDigest(), rule: RuleDigest(s.AcceptanceRule())}
}

// Digest is the spec's ResultDigest: what a result judged under it records.
func (j Judging) Digest() string { return j.result }

// Judged reports whether a result that recorded digest was judged under the spec: its
// ResultDigest; or, recorded before results carried one, the RuleDigest of the spec's
// rule, or no digest at all (before results carried any), both taken as read from the
// container the spec names, as they always were.
func (j Judging) Judged(digest string) bool {
	return digest == "" || digest == j.result || digest == j.rule
}

// JudgingDigest identifies what in the spec judges the batch: every field but
// ttlSecondsAfterFinished, which only says how long the account is kept. It is the first
// 128 bits of the SHA-256 of that part of the spec in JSON, in hex.
func (s *BatchAccountSpec) JudgingDigest() string {
	judging := *s
	judging.TTLSecondsAfterFinished = nil
	b, err := json.Marshal(&judging)
	if err != nil {
		return "" // a spec of strings, numbers and lists always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// AllAssignments are the spec's assignments followed by its repairs, each of these marked
// Repair: the one mapping the account judges. Code that asks which targets an account
// names reads this, never Assignments alone, so that a repair Job joins its account
// wherever its repair assignment is written.
func (s *BatchAccountSpec) AllAssignments() []Assignment {
	if len(s.Repairs) == 0 {
		return s.Assignments
	}
	all := make([]Assignment, 0, len(s.Assignments)+len(s.Repairs))
	all = append(all, s.Assignments...)
	for _, r := range s.Repairs {
		r.Repair = true
		all = append(all, r)
	}
	return all
}

// WorkDone tells, from the status the controller wrote (which users cannot write), the
// first sign that work was done under the account's spec, or "" when none is: a result
// recorded, an identity superseded, or a target started (its pods told their shards),
// admitted by Kueue, with an index completed or failed, or terminated. From then on the
// spec's mapping, revisions and requirement of results judge that work and are frozen
// (the BatchAccount webhook), so the controller writes this first sign at once.
func (s *BatchAccountStatus) WorkDone() string {
	if n := s.Results.Recorded; n > 0 {
		return fmt.Sprintf("%d results recorded", n)
	}
	if len(s.History) > 0 {
		return "a target's Job was replaced"
	}
	for i := range s.Targets {
		if w := s.Targets[i].Work(); w != "" {
			return w
		}
	}
	return ""
}

// Work is WorkDone for one target's status.
func (t *TargetStatus) Work() string {
	switch w := t.Workload; {
	case w != nil && (w.Admitted || w.Finished), len(t.Admissions) > 0:
		return t.Name + " was admitted"
	case t.StartedAt != nil:
		return t.Name + " started"
	case t.CompletedIndexes != "" || t.CompletedIndexesOmitted || t.FailedIndexes != "" || t.SuccessfulAttempts > 0:
		return t.Name + " ended indexes"
	case t.Terminal != "":
		return t.Name + " terminated"
	}
	return ""
}
