package result

import (
	"strings"
	"testing"
)

// TestRuleLengthBound: a rule of exactly MaxRuleLength bytes compiles; one byte more is
// refused, saying how long it is.
func TestRuleLengthBound(t *testing.T) {
	atLimit := strings.Repeat(" ", MaxRuleLength-len(seedRule)) + seedRule
	if _, err := Compile(atLimit); err != nil {
		t.Errorf("a rule of %d bytes: %v", len(atLimit), err)
	}
	_, err := Compile(" " + atLimit)
	if want := "acceptance rule is 4097 bytes, longer than the 4096 allowed"; err == nil || err.Error() != want {
		t.Errorf("a rule of %d bytes: %v; want %q", len(atLimit)+1, err, want)
	}
}
