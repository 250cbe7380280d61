package resolve

import "testing"

// TestKindNameUse: the usage line names an account, a Workload and every kind of target,
// in the registry's order.
func TestKindNameUse(t *testing.T) {
	if got, want := KindNameUse("explain"), "explain (account|workload|job|jobset|trainjob) NAME"; got != want {
		t.Errorf("KindNameUse = %q, want %q", got, want)
	}
}
