package result

import "testing"

// typical is a typical result with one extra field, as the controller sees it per pod.
const typical = `{"version":"batchledger.dev/v1","shard":"part-00017","inputRevision":"dataset@2024-06-01","modelRevision":"model-v3.2",` +
	`"output":"s3://bucket/run-42/part-00017.parquet","digest":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",` +
	`"records":120000,"valid":119998,"durationSeconds":812.5}`

func BenchmarkDecode(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(typical)))
	for b.Loop() {
		if _, err := Decode(typical); err != nil {
			b.Fatal(err)
		}
	}
}
