package acceptance

import (
	"testing"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
)

// typical is a typical result with one extra field, as the controller sees it per pod.
const typical = `{"version":"batchledger.dev/v1","shard":"part-00017","inputRevision":"dataset@2024-06-01","modelRevision":"model-v3.2",` +
	`"output":"s3://bucket/run-42/part-00017.parquet","digest":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",` +
	`"records":120000,"valid":119998,"durationSeconds":812.5}`

func BenchmarkEvaluate(b *testing.B) {
	c, err := Compile(seedRule)
	if err != nil {
		b.Fatal(err)
	}
	r, err := result.Decode(typical)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, msg := c.Evaluate(r); ok {
			b.Fatal("typical result met a rule it does not meet")
		} else if msg == "" {
			b.Fatal("no message")
		}
	}
}

func BenchmarkEvaluateMet(b *testing.B) {
	c, err := Compile("result.valid <= result.records && result.records > 0 && result.durationSeconds < 3600.0")
	if err != nil {
		b.Fatal(err)
	}
	r, err := result.Decode(typical)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, msg := c.Evaluate(r); !ok {
			b.Fatal(msg)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(seedRule); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromPod(b *testing.B) {
	c, err := NewCache(0).Get(seedRule)
	if err != nil {
		b.Fatal(err)
	}
	pod := workerPod(nil, workerStatus(typical))
	b.ReportAllocs()
	for b.Loop() {
		if r := FromPod("job/j", "uid", 17, pod, "", c); r.RejectReason != v1alpha1.RejectionCriterionNotMet {
			b.Fatal(r)
		}
	}
}
