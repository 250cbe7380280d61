package account

import (
	"encoding/json"
	"runtime"
	"testing"
)

// retainedBytes is the live heap that keep (called once) leaves reachable: the heap after
// a full collection with keep's result alive, minus the heap before. Allocation counters
// (B/op) over-state what a long-lived account costs, because most of a computation's
// garbage is freed at once; this is what stays.
func retainedBytes(keep func() any) (int64, any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := keep()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), v
}

// BenchmarkAccount1MIndexes computes one account of 1,000,000 shards (compact form, the
// API's maximum) over 100 Jobs of 10,000 indexes, each Job missing every 7th index and its
// last (~143,000 gaps in all). Besides time and allocations per computation it reports
// the memory the computed result retains, per tracked index and in total: the
// target is < 100 MiB for 1M tracked indexes. It also reports the status's JSON size,
// because an object larger than etcd's request limit cannot be written at all.
func BenchmarkAccount1MIndexes(b *testing.B) {
	const jobs, perJob = 100, 10000
	in := largeInput(jobs, perJob)

	// Whole output (status and compiled mapping), then the status alone: the controller
	// keeps only the status (in its informer cache) between reconciles.
	total, v := retainedBytes(func() any { return Compute(in) })
	out := v.(Output)
	if got := out.Status.Shards.Total; got != jobs*perJob {
		b.Fatalf("total shards %d, want %d", got, jobs*perJob)
	}
	if out.Status.Shards.Covered == 0 || out.Status.Shards.Covered == out.Status.Shards.Total {
		b.Fatalf("covered %d of %d: the input should leave gaps", out.Status.Shards.Covered, out.Status.Shards.Total)
	}
	status, _ := retainedBytes(func() any { s := Compute(in).Status; return &s })
	// The serialized status is what must fit in one etcd request (1.5 MiB by default).
	wire, err := json.Marshal(out.Status)
	if err != nil {
		b.Fatal(err)
	}
	in.Previous = &out.Status

	b.ReportAllocs()
	for b.Loop() {
		o := Compute(in)
		in.Previous = &o.Status
	}
	b.ReportMetric(float64(total)/float64(jobs*perJob), "B/index")
	b.ReportMetric(float64(total)/(1<<20), "MiB-retained")
	b.ReportMetric(float64(status)/(1<<20), "MiB-status")
	b.ReportMetric(float64(len(wire))/(1<<20), "MiB-status-JSON")
}

// BenchmarkThousandAccounts computes 1,000 accounts of 100 shards (4 Jobs of 25 indexes
// each, with gaps) one after another per op: the controller's cost of a namespace full of
// small batches after a resync, where per-account overhead rather than size dominates.
func BenchmarkThousandAccounts(b *testing.B) {
	const accounts = 1000
	ins := make([]Input, accounts)
	for i := range ins {
		ins[i] = largeInput(4, 25)
		out := Compute(ins[i])
		ins[i].Previous = &out.Status
	}
	b.ReportAllocs()
	for b.Loop() {
		for i := range ins {
			out := Compute(ins[i])
			ins[i].Previous = &out.Status
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/accounts, "ns/account")
}
