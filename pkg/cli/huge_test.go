package cli

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestHugeAccountBoundedStatus: a million shards with every other index missing make a
// status the controller bounds (completedIndexes omitted, missing ordinals truncated).
// explain still counts everything and says what was left out; repair refuses with a
// reason instead of repairing a partial list.
func TestHugeAccountBoundedStatus(t *testing.T) {
	const n = 1000000
	var done strings.Builder
	for i := 0; i < n; i += 2 {
		if i > 0 {
			done.WriteByte(',')
		}
		done.WriteString(strconv.Itoa(i))
	}
	ba := wrappers.MakeBatchAccount("huge", ns).ShardCount("s", n).AssignJobOrdinals("huge", fmt.Sprintf("0-%d", n-1), fmt.Sprintf("0-%d", n-1)).Generation(1).Obj()
	job := clitest.SeedJob("huge", "uid-huge", n).Completed(done.String(), n/2).ResourceVersion("7").Obj()
	ba = clitest.Compute(ba, clitest.Time0, map[string]account.Observation{"job/huge": {Job: jobkind.Facts(job)}})
	if !ba.Status.Shards.MissingOrdinalsTruncated || !ba.Status.Targets[0].CompletedIndexesOmitted {
		t.Fatalf("the status was not bounded: truncated=%v omitted=%v", ba.Status.Shards.MissingOrdinalsTruncated, ba.Status.Targets[0].CompletedIndexesOmitted)
	}

	out, _, code := run(t, clitest.FakeClient(ba, job), "explain", "account", "huge", "-n", ns, "--max-rows", "5")
	if code != options.ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, phrase := range []string{"500000/1000000 shards covered", "(500000 indexes)", "omitted from the account status", "+499995 more missing shards"} {
		if !strings.Contains(out, phrase) {
			t.Errorf("explanation lacks %q:\n%s", phrase, out)
		}
	}

	_, err := PlanRepair(RepairInput{Account: ba, Jobs: clitest.JobsByName(job)})
	if err == nil || !strings.Contains(err.Error(), "500000 shards are missing, more than the status can list") {
		t.Errorf("repair of a truncated list: %v", err)
	}
}
