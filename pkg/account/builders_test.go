package account

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// The objects of these tests are built with the shared wrappers (pkg/testing/wrappers);
// these shorthands fix the package's defaults: namespace ml-team, account ij245 on
// input revision D and model revision m-2026-11.

// jobCondAt is when the Jobs of these tests changed their conditions.
var jobCondAt = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// makeJob is an Indexed Job of completions indexes, as the API server returns it.
func makeJob(name string, uid string, completions int32) *wrappers.JobWrapper {
	return wrappers.MakeJob(name, "ml-team").Indexed(completions).UID(uid).ResourceVersion("1")
}

// makeSpec is an account of the named shards; add assignments, take SpecObj().
func makeSpec(names ...string) *wrappers.BatchAccountWrapper {
	return wrappers.MakeBatchAccount("ij245", "ml-team").Shards(names...)
}

// makeCompactSpec is an account of count shards named prefix0, prefix1, ...
func makeCompactSpec(prefix string, count int32) *wrappers.BatchAccountWrapper {
	return wrappers.MakeBatchAccount("ij245", "ml-team").ShardCount(prefix, count)
}

// pods returns one successful attempt per listed index, with UIDs "<prefix>-<n>".
func pods(prefix string, indexes ...int) []PodAttempt {
	out := make([]PodAttempt, len(indexes))
	for n, i := range indexes {
		out[n] = PodAttempt{UID: types.UID(fmt.Sprintf("%s-%d", prefix, n)), Index: i}
	}
	return out
}

func result(target, uid string, index int, shard string) Result {
	return Result{
		Target: target, JobUID: types.UID(uid), Index: index,
		Pod: fmt.Sprintf("%s-%d", target[4:], index), PodUID: types.UID(fmt.Sprintf("pod-%d", index)),
		Shard: shard, InputRevision: "D", ModelRevision: "m-2026-11", Digest: "sha256:" + shard,
	}
}

// roomForIndexLists gives the status room for lists index lists (limits.indexLists)
// while t runs, as a status too large for them has.
func roomForIndexLists(t *testing.T, lists int) {
	t.Helper()
	saved := statusLimits
	statusLimits = func(n int) limits { l := limitsFor(n); l.indexLists = lists; return l }
	t.Cleanup(func() { statusLimits = saved })
}
