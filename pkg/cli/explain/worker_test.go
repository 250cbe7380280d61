package explain

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/cli/explanation"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
)

// acceptedSeed builds the seed's Accepted account (IJ245's last step) and its recorded
// results, each from this cluster unless From names the worker it was recorded from.
type acceptedSeed struct {
	s clitest.IJ245
}

func seedAccepted() *acceptedSeed { return &acceptedSeed{s: clitest.SeedSteps()} }

// From records shard's result as read from a MultiKueue worker cluster's WorkerResult.
func (b *acceptedSeed) From(shard, cluster string) *acceptedSeed {
	for i := range b.s.Chunks[0].Results {
		if r := &b.s.Chunks[0].Results[i]; r.Shard == shard {
			r.Cluster = cluster
		}
	}
	return b
}

func (b *acceptedSeed) Client() client.Client { return seedClient(b.s, len(b.s.Steps)-1) }

// TestExplainResultWorker: a result recorded from a worker cluster names its worker in
// the text (a WORKER column, shown only when some result came from a worker) and in -o
// json (the accepted result's cluster).
func TestExplainResultWorker(t *testing.T) {
	cases := []struct {
		name string
		seed *acceptedSeed
		// rows are the accepted results' lines by shard, each read from the shard on;
		// want is each shard's worker in -o json ("" when none).
		rows map[string]string
		want map[string]string
	}{{
		name: "every result from this cluster: no WORKER column",
		seed: seedAccepted(),
		rows: map[string]string{"A": "A      job j index 0  j-0-x7k20  sha256:a0  s3://batches/ij245/D/A  ml-team-gpu on main=nvidia.com/gpu:h100\n"},
		want: map[string]string{"A": "", "D": ""},
	}, {
		name: "every result from one worker",
		seed: seedAccepted().From("A", "worker-a").From("B", "worker-a").From("C", "worker-a").From("D", "worker-a"),
		rows: map[string]string{
			"A": "A      job j index 0  j-0-x7k20  sha256:a0  s3://batches/ij245/D/A  ml-team-gpu on main=nvidia.com/gpu:h100  worker-a\n",
			"D": "D      job j index 3  j-3-x7k23  sha256:a3  s3://batches/ij245/D/D  ml-team-gpu on main=nvidia.com/gpu:h100  worker-a\n",
		},
		want: map[string]string{"A": "worker-a", "D": "worker-a"},
	}, {
		name: "results from two workers and this cluster",
		seed: seedAccepted().From("A", "worker-a").From("C", "worker-b"),
		rows: map[string]string{
			"A": "A      job j index 0  j-0-x7k20  sha256:a0  s3://batches/ij245/D/A  ml-team-gpu on main=nvidia.com/gpu:h100  worker-a\n",
			"B": "B      job j index 1  j-1-x7k21  sha256:a1  s3://batches/ij245/D/B  ml-team-gpu on main=nvidia.com/gpu:h100  (this cluster)\n",
			"C": "C      job j index 2  j-2-x7k22  sha256:a2  s3://batches/ij245/D/C  ml-team-gpu on main=nvidia.com/gpu:h100  worker-b\n",
		},
		want: map[string]string{"A": "worker-a", "B": "", "C": "worker-b"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.seed.Client()
			out, errOut, code := run(t, c, "explain", "account", "ij245", "-n", ns)
			if code != options.ExitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			withWorker := false
			for line := range strings.Lines(out) {
				if strings.HasPrefix(line, "    SHARD  IDENTITY") {
					withWorker = strings.HasSuffix(line, "  WORKER\n")
				}
			}
			if wantWorker := len(tc.want) > 0 && anyWorker(tc.want); withWorker != wantWorker {
				t.Errorf("WORKER column shown: %v, want %v:\n%s", withWorker, wantWorker, out)
			}
			for shard, row := range tc.rows {
				if !strings.Contains(out, "\n    "+row) {
					t.Errorf("shard %s: no line reads %q:\n%s", shard, row, out)
				}
			}

			js, _, code := run(t, c, "explain", "account", "ij245", "-n", ns, "-o", "json")
			if code != options.ExitOK {
				t.Fatalf("-o json: exit %d", code)
			}
			var ex explanation.Explanation
			if err := json.Unmarshal([]byte(js), &ex); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, a := range ex.Results.Accepted {
				got[a.Shard] = a.Cluster
			}
			for shard, cluster := range tc.want {
				if got[shard] != cluster {
					t.Errorf("-o json: shard %s cluster %q, want %q", shard, got[shard], cluster)
				}
			}
		})
	}
}

func anyWorker(clusters map[string]string) bool {
	for _, c := range clusters {
		if c != "" {
			return true
		}
	}
	return false
}
