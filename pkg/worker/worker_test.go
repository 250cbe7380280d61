package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"batchledger.dev/batchledger/pkg/result"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestWorkerReportsItsShard(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{
		EnvIndex: "3", EnvShards: "A, B, C, D", EnvInputRevision: "D", EnvModelRevision: "m-2026-11",
		EnvOutputPrefix: "s3://b/", EnvRecords: "10",
	}))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Process(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Shard != "D" || r.Output != "s3://b/D" || r.Records != 10 || r.Valid != 10 {
		t.Errorf("report = %+v", r)
	}
	path := filepath.Join(t.TempDir(), "termination-log")
	if err := WriteTerminationMessage(path, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	back, err := result.Decode(string(b))
	if err != nil || back.Shard != "D" || back.Digest != r.Digest {
		t.Errorf("the message does not decode to the report: %v %+v", err, back)
	}
	// Another attempt of the same shard reports the same digest; another revision does not.
	again, _ := Process(cfg)
	cfg.ModelRevision = "m-2026-10"
	other, _ := Process(cfg)
	if again.Digest != r.Digest || other.Digest == r.Digest {
		t.Errorf("digests: %s %s %s", r.Digest, again.Digest, other.Digest)
	}
}

func TestWorkerErrors(t *testing.T) {
	if _, err := ConfigFromEnv(env(map[string]string{EnvShards: "A"})); err == nil {
		t.Error("missing completion index accepted")
	}
	cfg, _ := ConfigFromEnv(env(map[string]string{EnvIndex: "4", EnvShards: "A,B,C,D"}))
	if _, err := Process(cfg); err == nil {
		t.Error("index without a shard accepted")
	}
}

func TestWorkerOfAJobSetChild(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{
		EnvIndex: "2", EnvShardPrefix: "part-", EnvJobIndex: "1", EnvIndexesPerJob: "4",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := cfg.Shard(); err != nil || s != "part-6" {
		t.Errorf("shard = %q, %v; want part-6 (child 1, index 2, 4 indexes per child)", s, err)
	}
}

// TestWorkerShardSources: the shard the pod was told wins over the copied list, and a pod
// told nothing falls back to the list, or fails saying why.
func TestWorkerShardSources(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
		err  string
	}{
		{"told by the account", map[string]string{EnvShard: "R7", EnvIndex: "1", EnvShards: "A,B"}, "R7", ""},
		{"told, without an index", map[string]string{EnvShard: "R7"}, "R7", ""},
		{"not told: the list", map[string]string{EnvShard: "", EnvIndex: "1", EnvShards: "A,B"}, "B", ""},
		{"not told, no list", map[string]string{EnvShard: "", EnvIndex: "1"}, "", "no batchledger.dev/shard annotation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ConfigFromEnv(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			got, err := cfg.Shard()
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Shard() = %q, %v; want %q, error saying %q", got, err, tc.want, tc.err)
			}
		})
	}
}
