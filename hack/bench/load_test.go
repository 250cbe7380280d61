package main

import (
	"fmt"
	"testing"

	"batchledger.dev/batchledger/pkg/account"
)

// TestPlanAccountsArePartitions checks that every account the load benchmark plans is
// one the validating webhook admits (its mapping a partition of its shards), whatever
// the size, including Jobs of a single index.
func TestPlanAccountsArePartitions(t *testing.T) {
	for _, tc := range []struct {
		mode           string
		size           size
		jobsPerAccount int
		wantAccounts   int
	}{
		{mode: modeCoverage, size: size{jobs: 1, indexes: 1}, jobsPerAccount: 5, wantAccounts: 1},
		{mode: modeCoverage, size: size{jobs: 7, indexes: 1}, jobsPerAccount: 5, wantAccounts: 2},
		{mode: modeResults, size: size{jobs: 20, indexes: 50}, jobsPerAccount: 5, wantAccounts: 4},
		{mode: modeCoverage, size: size{jobs: 3, indexes: 2}, jobsPerAccount: 1, wantAccounts: 3},
		{mode: modeMixed, size: size{jobs: 100, indexes: 2}, jobsPerAccount: 5, wantAccounts: 2},
	} {
		t.Run(fmt.Sprintf("%s %s per %d", tc.mode, tc.size, tc.jobsPerAccount), func(t *testing.T) {
			l := &load{cfg: loadConfig{jobsPerAccount: tc.jobsPerAccount, parallelism: 10}}
			accounts, _, _ := l.plan(tc.mode, tc.size, "ns")
			if len(accounts) != tc.wantAccounts {
				t.Fatalf("planned %d accounts, want %d", len(accounts), tc.wantAccounts)
			}
			for _, ba := range accounts {
				if m := account.Compile(ba.Namespace, &ba.Spec); len(m.Problems) > 0 {
					t.Errorf("account %s is not a partition: %+v", ba.Name, m.Problems)
				}
			}
		})
	}
}
