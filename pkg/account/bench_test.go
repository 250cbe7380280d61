package account

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// largeInput is an account of jobs*perJob shards in compact form, each Job's indexes
// mapped onto a contiguous ordinal range, each Job missing every 7th index and its last.
func largeInput(jobs, perJob int) Input {
	spec := &v1alpha1.BatchAccountSpec{
		InputRevision: "D", ModelRevision: "m",
		Shards: v1alpha1.ShardPopulation{Prefix: "shard-", Count: ptr.To(int32(jobs * perJob))},
	}
	obs := map[string]Observation{}
	for i := range jobs {
		name := fmt.Sprintf("job-%03d", i)
		spec.Assignments = append(spec.Assignments, v1alpha1.Assignment{
			Target:        v1alpha1.TargetRef{Job: name},
			Indexes:       fmt.Sprintf("0-%d", perJob-1),
			ShardOrdinals: fmt.Sprintf("%d-%d", i*perJob, (i+1)*perJob-1),
		})
		var b strings.Builder
		for start := 0; start < perJob-1; start += 7 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d-%d", start, min(start+5, perJob-2))
		}
		obs["job/"+name] = Observation{Job: makeJob(name, "uid-"+name, int32(perJob)).Completed(b.String(), 0).Facts()}
	}
	return Input{Namespace: "ml-team", Generation: 1, Spec: spec, Observations: obs, Now: metav1.NewTime(time0)}
}

// BenchmarkAccount100kShards100Jobs computes an account of 100,000 shards over 100 Jobs
// whose completedIndexes have ~14,000 gaps in all.
func BenchmarkAccount100kShards100Jobs(b *testing.B) {
	in := largeInput(100, 1000)
	b.ReportAllocs()
	for b.Loop() {
		out := Compute(in)
		in.Previous = &out.Status
	}
}

// BenchmarkAccountIJ245 is the cost of one small account: the common case, times 1,000
// live accounts.
func BenchmarkAccountIJ245(b *testing.B) {
	in := largeInput(1, 4)
	b.ReportAllocs()
	for b.Loop() {
		out := Compute(in)
		in.Previous = &out.Status
	}
}
