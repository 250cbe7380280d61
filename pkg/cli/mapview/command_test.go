package mapview

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
	"batchledger.dev/batchledger/pkg/cli/options"
	"batchledger.dev/batchledger/pkg/indexset"
	jobkind "batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestMapIJ245 draws the map of each IJ245 step: D missing, all covered, Complete with
// results pending, all accepted.
func TestMapIJ245(t *testing.T) {
	s := clitest.SeedSteps()
	names := []string{"map_ij245_1_five_attempts", "map_ij245_2_all_covered", "map_ij245_3_complete", "map_ij245_4_accepted"}
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{s.Steps[i].DeepCopy(), s.Job.DeepCopy()}
			if i == 3 {
				objs = append(objs, s.Chunks[0].DeepCopy())
			}
			out, errOut, code := run(t, clitest.FakeClient(objs...), "map", "ij245", "-n", ns, "--width", "80")
			if code != options.ExitOK || errOut != "" {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			clitest.Golden(t, name, []byte(out))
		})
	}
}

// rejectedChunk is IJ245's results with shard C's on the wrong model revision.
func rejectedChunk() *v1alpha1.ShardResults {
	c := clitest.SeedSteps().Chunks[0].DeepCopy()
	c.Results[2].ModelRevision = "m-2026-10"
	return c
}

// conflictAccount is IJ245 with every result accepted, a later result for shard B with
// another digest (a conflict), and shard C's only result rejected.
func conflictAccount() (*v1alpha1.BatchAccount, *v1alpha1.ShardResults) {
	s := clitest.SeedSteps()
	c := rejectedChunk()
	again := c.Results[1]
	again.Pod, again.PodUID, again.Digest = "j-1-again", "pod-1-again", "sha256:ff"
	again.RecordedAt = metav1.NewTime(again.RecordedAt.Add(time.Hour))
	c.Results = append(c.Results, again)
	ba := clitest.Compute(s.Steps[2], clitest.CompleteT.Add(2*time.Hour), map[string]account.Observation{"job/j": {Job: jobkind.Facts(s.Job), Workload: clitest.WorkloadObs(true)}}, account.RecordedInOrder([]v1alpha1.ShardResults{*c})...)
	return ba, c
}

// TestMapStates: each state has its own character without a terminal, and the counts
// agree with the account's.
func TestMapStates(t *testing.T) {
	ba, chunk := conflictAccount()
	if ba.Status.Results.Conflicts != 1 || ba.Status.Results.Rejected != 1 || ba.Status.Shards.Accepted != 3 {
		t.Fatalf("fixture: results %+v, accepted %d", ba.Status.Results, ba.Status.Shards.Accepted)
	}
	out, _, code := run(t, clitest.FakeClient(ba, chunk), "map", "ij245", "-n", ns, "--width", "80")
	if code != options.ExitOK {
		t.Fatalf("exit %d", code)
	}
	clitest.Golden(t, "map_conflict_rejected", []byte(out))
	if !strings.Contains(out, "\n  #!x#\n") {
		t.Errorf("want cells A accepted, B conflict, C rejected, D accepted:\n%s", out)
	}
	sm := buildShardMap(clitest.FailedAccount(), nil)
	if got := sm.States; len(got) != 4 || got[3] != stateMissing || got[0] != stateCovered {
		t.Errorf("failed account states = %v", got)
	}
	// Complete with every pod gone and no result recorded: no result can arrive.
	var b bytes.Buffer
	renderMap(&b, buildShardMap(clitest.MissingResultAccount(), nil), mapOptions{width: 80})
	clitest.Golden(t, "map_missing_results", b.Bytes())
	if !strings.Contains(b.String(), "\n  oooo\n") || !strings.Contains(b.String(), "o covered, no result can arrive") {
		t.Errorf("want four shards whose result can no longer arrive, and the legend naming them:\n%s", b.String())
	}
}

// TestMapBig draws 100,000 shards over ten Jobs with runs missing: 25 shards a cell, the
// worst state of each run shown.
func TestMapBig(t *testing.T) {
	out, _, code := run(t, clitest.FakeClient(clitest.BigAccount()), "map", "big", "-n", ns, "--width", "100")
	if code != options.ExitOK {
		t.Fatalf("exit %d", code)
	}
	clitest.Golden(t, "map_big_100k", []byte(out))
	sm := buildShardMap(clitest.BigAccount(), nil)
	if sm.Counts[stateMissing] != 11800 || sm.Counts[stateCovered] != 88200 {
		t.Errorf("counts = %v, want 11800 missing and 88200 covered", sm.Counts)
	}
	// Job big-8 misses indexes 5000-5199: cells 200..207 of 25 shards are missing.
	cells := sm.cellsOf(&sm.Groups[8], 25)
	for k, c := range cells {
		want := stateCovered
		if k >= 200 && k < 208 {
			want = stateMissing
		}
		if c.State != want {
			t.Errorf("big-8 cell %d (%d-%d) = %s, want %s", k, c.First, c.Last, stateInfo[c.State].name, stateInfo[want].name)
		}
	}
}

// TestMapWorstStateOfRun: a cell of a run shows its worst shard.
func TestMapWorstStateOfRun(t *testing.T) {
	sm := &shardMap{Total: 6, States: []shardState{stateAccepted, stateMissing, stateAccepted, stateCovered, stateRejected, stateConflict},
		Groups: []shardGroup{{Name: "job j", Runs: []indexset.Interval{{First: 0, Last: 5}}}}}
	got := sm.cellsOf(&sm.Groups[0], 2)
	want := []shardState{stateMissing, stateCovered, stateRejected}
	for i := range want {
		if got[i].State != want[i] {
			t.Errorf("cell %d = %s, want %s", i, stateInfo[got[i].State].name, stateInfo[want[i]].name)
		}
	}
}

// TestMapBoundedStatus: a status that left the missing list and the completed indexes out
// (a million fragmented shards) shows the shards it cannot place as unknown, not covered.
func TestMapBoundedStatus(t *testing.T) {
	const n = 1000000
	var done strings.Builder
	for i := 0; i < n; i += 2 {
		if i > 0 {
			done.WriteByte(',')
		}
		fmt.Fprint(&done, i)
	}
	ba := wrappers.MakeBatchAccount("huge", ns).ShardCount("s", n).AssignJobOrdinals("huge", fmt.Sprintf("0-%d", n-1), fmt.Sprintf("0-%d", n-1)).Generation(1).Obj()
	ba = clitest.Compute(ba, clitest.Time0, map[string]account.Observation{"job/huge": {Job: clitest.SeedJob("huge", "uid-huge", n).Completed(done.String(), n/2).ResourceVersion("7").Facts()}})
	if !ba.Status.Shards.MissingOrdinalsTruncated || !ba.Status.Targets[0].CompletedIndexesOmitted {
		t.Fatal("the fixture's status is not bounded")
	}
	sm := buildShardMap(ba, nil)
	if sm.Counts[stateUnknown] == 0 || sm.Counts[stateMissing]+sm.Counts[stateCovered]+sm.Counts[stateUnknown] != n {
		t.Errorf("counts = %v", sm.Counts)
	}
	var b bytes.Buffer
	renderMap(&b, sm, mapOptions{width: 100})
	if !strings.Contains(b.String(), "? not listed in the status") {
		t.Errorf("the legend must name the unknown state:\n%s", b.String()[:min(b.Len(), 2000)])
	}
}

// TestMapColour: on a terminal the cells are coloured blocks.
func TestMapColour(t *testing.T) {
	s := clitest.SeedSteps()
	var b bytes.Buffer
	renderMap(&b, buildShardMap(s.Steps[0], nil), mapOptions{width: 80, colour: true})
	clitest.Golden(t, "map_ij245_1_colour", []byte(clitest.VisibleEscapes(b.String())))
}

// svgNode is any SVG element, for checking what was written.
type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []svgNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n *svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// cells returns the rects under groups named group-*, by state.
func (n *svgNode) cells() map[string][]string {
	out := map[string][]string{}
	for _, g := range n.Nodes {
		if g.XMLName.Local != "g" || !strings.HasPrefix(g.attr("id"), "group-") {
			continue
		}
		for _, r := range g.Nodes {
			if r.XMLName.Local == "rect" {
				out[r.attr("data-state")] = append(out[r.attr("data-state")], r.attr("data-shards"))
			}
		}
	}
	return out
}

// TestMapSVG: --svg writes an SVG document that parses as XML, with one rect per cell
// carrying its state and shard range, and a legend.
func TestMapSVG(t *testing.T) {
	ba, chunk := conflictAccount()
	path := filepath.Join(t.TempDir(), "ij245.svg")
	out, errOut, code := run(t, clitest.FakeClient(ba, chunk), "map", "ij245", "-n", ns, "--svg", path)
	if code != options.ExitOK || out != "wrote "+path+"\n" {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clitest.Golden(t, "map_conflict_rejected_svg", data)
	var doc svgNode
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	if doc.XMLName.Space != "http://www.w3.org/2000/svg" || doc.XMLName.Local != "svg" {
		t.Errorf("root element = %v", doc.XMLName)
	}
	got := doc.cells()
	want := map[string][]string{"accepted": {"0", "3"}, "conflict": {"1"}, "rejected": {"2"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("cells = %v, want %v", got, want)
	}
	legend := 0
	for _, g := range doc.Nodes {
		if g.attr("id") == "legend" {
			legend = len(g.Nodes)
		}
	}
	if legend != 10 { // accepted, covered, missing, conflict, rejected: a swatch and a label each
		t.Errorf("legend holds %d elements, want 10", legend)
	}

	// 100,000 shards: cells of 10 shards within the SVG budget, each run's worst state.
	var b bytes.Buffer
	if err := writeSVG(&b, buildShardMap(clitest.BigAccount(), nil), 0); err != nil {
		t.Fatal(err)
	}
	doc = svgNode{}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("the 100k SVG does not parse: %v", err)
	}
	// Without results required, covered is final: drawn as done.
	for _, g := range doc.Nodes {
		if g.attr("id") != "group-0" {
			continue
		}
		if fill := g.Nodes[1].attr("fill"); g.Nodes[1].attr("data-state") != "covered" || fill != stateInfo[stateAccepted].fill {
			t.Errorf("a covered cell of an account requiring no results is filled %q, want %q", fill, stateInfo[stateAccepted].fill)
		}
	}
	cells := doc.cells()
	if n := len(cells["covered"]) + len(cells["missing"]); n != 10000 || len(cells["missing"]) != 1180 {
		t.Errorf("100k map: %d covered and %d missing cells, want 10000 in all, 1180 missing", len(cells["covered"]), len(cells["missing"]))
	}
}

// BenchmarkMap1MShards maps and draws an account of 1,000,000 shards over 100 Jobs with
// runs missing and 10,000 recorded results, to a terminal layout and to SVG. The budget
// is a second per map.
func BenchmarkMap1MShards(b *testing.B) {
	const jobs, per = 100, 10000
	w := wrappers.MakeBatchAccount("million", ns).ShardCount("s", jobs*per).RequireResults(clitest.SeedRule)
	obs := map[string]account.Observation{}
	for j := range jobs {
		name := fmt.Sprintf("m-%d", j)
		w.AssignJobOrdinals(name, fmt.Sprintf("0-%d", per-1), fmt.Sprintf("%d-%d", j*per, j*per+per-1))
		done := fmt.Sprintf("0-%d", per-1)
		if j%7 == 3 {
			done = fmt.Sprintf("0-%d,%d-%d", 4999, 5400, per-1)
		}
		job := clitest.SeedJob(name, types.UID("uid-"+name), per).Completed(done, per).ResourceVersion("1")
		if j%7 != 3 {
			job.Complete(clitest.CompleteT.Time)
		}
		obs["job/"+name] = account.Observation{Job: job.Facts()}
	}
	ba := w.Generation(1).Obj()
	ba = clitest.Compute(ba, clitest.Time0, obs)
	chunk := v1alpha1.ShardResults{ObjectMeta: metav1.ObjectMeta{Name: "million-0", Namespace: ns}, Account: "million"}
	for i := range per {
		chunk.Results = append(chunk.Results, v1alpha1.RecordedResult{
			Ordinal: int32(i), Shard: fmt.Sprintf("s%d", i), Target: "job/m-0", JobUID: "uid-m-0", Index: int32(i),
			Pod: fmt.Sprintf("m-0-%d", i), PodUID: types.UID(fmt.Sprintf("p-%d", i)), InputRevision: "D", ModelRevision: "m-2026-11",
			Digest: "sha256:00", Records: 1, Valid: 1, RecordedAt: metav1.NewTime(clitest.Time0.Add(time.Duration(i) * time.Millisecond)),
		})
	}
	chunks := []v1alpha1.ShardResults{chunk}
	b.ResetTimer()
	for b.Loop() {
		sm := buildShardMap(ba, chunks)
		renderMap(io.Discard, sm, mapOptions{width: 120})
		if err := writeSVG(io.Discard, sm, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMapRefusesNegativeSizes: a negative --width or --shards-per-cell is refused before
// the cluster is asked, rather than silently read as "fit the terminal".
func TestMapRefusesNegativeSizes(t *testing.T) {
	for _, flag := range []string{"--width", "--shards-per-cell"} {
		out, errOut, code := run(t, clitest.FakeClient(), "map", "ij245", "-n", ns, flag, "-1")
		if code != options.ExitError || out != "" || !strings.Contains(errOut, flag+" must not be negative") {
			t.Errorf("%s -1: exit %d, stdout %q, stderr %q", flag, code, out, errOut)
		}
	}
}

// TestMapOnlyOwnedChunks: the map paints a shard accepted only from a chunk the manager
// would count, one whose label, accountUID and controller owner all name the account.
func TestMapOnlyOwnedChunks(t *testing.T) {
	s := clitest.SeedSteps()
	cases := map[string]struct {
		edit func(c *v1alpha1.ShardResults)
		want int
	}{
		"recorded by the manager": {edit: func(*v1alpha1.ShardResults) {}, want: 4},
		"no controller owner":     {edit: func(c *v1alpha1.ShardResults) { c.OwnerReferences = nil }, want: 0},
		"another accountUID":      {edit: func(c *v1alpha1.ShardResults) { c.AccountUID = "another-account" }, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			chunk := s.Chunks[0].DeepCopy()
			tc.edit(chunk)
			sm, err := loadShardMap(t.Context(), clitest.FakeClient(s.Steps[2].DeepCopy(), chunk), ns, "ij245")
			if err != nil {
				t.Fatal(err)
			}
			if got := sm.Counts[stateAccepted]; got != tc.want {
				t.Errorf("%d shards painted accepted, want %d", got, tc.want)
			}
		})
	}
}

// TestMapRuleInvalidPaintsNoAccepted: while the acceptance rule does not compile in the
// controller no result is judged, so no shard is painted accepted from the chunks.
func TestMapRuleInvalidPaintsNoAccepted(t *testing.T) {
	s := clitest.SeedSteps()
	cases := map[string]struct {
		ruleError string
		want      int
	}{
		"rule compiles":         {want: 4},
		"rule does not compile": {ruleError: "undeclared reference to 'reslt'", want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prev := s.Steps[2]
			ba := prev.DeepCopy()
			ba.Status = account.Compute(account.Input{
				Namespace: ns, Generation: ba.Generation, Spec: &ba.Spec, Previous: &prev.Status,
				Observations: map[string]account.Observation{"job/j": {Job: jobkind.Facts(s.Job), Workload: clitest.WorkloadObs(true)}},
				Results:      account.RecordedInOrder(s.Chunks), Now: metav1.NewTime(clitest.CompleteT.Add(time.Hour)), RuleError: tc.ruleError,
			}).Status
			if got := buildShardMap(ba, s.Chunks).Counts[stateAccepted]; got != tc.want || int(ba.Status.Shards.Accepted) != tc.want {
				t.Errorf("%d shards painted accepted, the status accepts %d, want %d", got, ba.Status.Shards.Accepted, tc.want)
			}
		})
	}
}

// TestMapStaleStatus: a status written for an older spec generation painted on the
// current spec is what was last judged, not the current spec's state (a changed mapping
// or population is not judged yet); the map says so, on a terminal and in the SVG, as
// explain and get do.
func TestMapStaleStatus(t *testing.T) {
	s := clitest.SeedSteps()
	const stale = "STALE: the status judges spec generation 1, the spec is at generation 2"
	cases := map[string]struct {
		generation int64
		wantStale  bool
	}{
		"current status":     {generation: 1},
		"spec changed since": {generation: 2, wantStale: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ba := s.Steps[len(s.Steps)-1].DeepCopy()
			ba.Generation = tc.generation
			c := clitest.FakeClient(ba, s.Job.DeepCopy(), s.Chunks[0].DeepCopy())
			out, errOut, code := run(t, c, "map", "ij245", "-n", ns, "--width", "80")
			if code != options.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			path := filepath.Join(t.TempDir(), "ij245.svg")
			if _, errOut, code := run(t, c, "map", "ij245", "-n", ns, "--svg", path); code != options.ExitOK {
				t.Fatalf("--svg: exit %d: %s", code, errOut)
			}
			svg, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, stale); got != tc.wantStale {
				t.Errorf("map says stale: %v, want %v:\n%s", got, tc.wantStale, out)
			}
			if got := strings.Contains(string(svg), stale); got != tc.wantStale {
				t.Errorf("SVG says stale: %v, want %v", got, tc.wantStale)
			}
		})
	}
}

// TestMapResultOfUncompletedIndex: a result reported for an index its Job has not
// completed (yet) decides nothing of its shard, accepted or rejected on its own merits:
// the index may still run again and report a result that stands. The controller leaves
// the shard missing, out of status.results.rejectedOrdinals, and so must the map.
func TestMapResultOfUncompletedIndex(t *testing.T) {
	cases := []struct {
		name  string
		model string
		// wantRejected is the status's judgement of the result; wantD the cell of shard D.
		wantRejected bool
		wantD        shardState
	}{
		{"acceptable result, index not completed: missing", "m-2026-11", false, stateMissing},
		{"wrong model revision, index not completed: missing", "m-2026-10", false, stateMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := clitest.SeedSteps()
			// Step 1: indexes 0-2 completed, the Job still running index 3 (shard D), whose
			// pod reported its result before the Job controller counted the index.
			r := s.Chunks[0].Results[3]
			r.ModelRevision = tc.model
			chunk := clitest.OwnedChunk(s.Steps[0], []v1alpha1.RecordedResult{r})
			j := clitest.SeedJob("j", clitest.JobUID, 4).Completed("0-2", 3).ResourceVersion("48213").Obj()
			ba := clitest.Compute(s.Steps[0], clitest.Time0.Add(time.Minute),
				map[string]account.Observation{"job/j": {Job: jobkind.Facts(j), Workload: clitest.WorkloadObs(false)}},
				account.RecordedInOrder([]v1alpha1.ShardResults{*chunk})...)
			if got := ba.Status.Results.RejectedOrdinals == "3"; got != tc.wantRejected || ba.Status.Shards.MissingOrdinals != "3" {
				t.Fatalf("fixture: shards %+v, results %+v", ba.Status.Shards, ba.Status.Results)
			}
			sm := buildShardMap(ba, []v1alpha1.ShardResults{*chunk})
			want := []shardState{stateCovered, stateCovered, stateCovered, tc.wantD}
			for o := range want {
				if sm.States[o] != want[o] {
					t.Errorf("shard %s = %s, want %s (status: missing %q, rejected %q)", sm.shardName(o), stateInfo[sm.States[o]].name,
						stateInfo[want[o]].name, ba.Status.Shards.Missing, ba.Status.Results.RejectedOrdinals)
				}
			}
			// The counts say what the status says.
			var b bytes.Buffer
			renderMap(&b, sm, mapOptions{width: 80})
			if title := "BatchAccount ml-team/ij245: 4 shards, 3 covered, 0 accepted, "; !strings.HasPrefix(b.String(), title) || !strings.Contains(b.String(), "(4 shards: 3 covered,") {
				t.Errorf("want the title to start %q and job j's summary to count 3 covered, as the status does:\n%s", title, b.String())
			}
		})
	}
}

// TestMapNotJudged: an account the controller has written no status for has no shard
// state yet: the map draws its shards unknown and says it is not judged, on a terminal
// and in the SVG, as get (MISSING <not judged>) and explain (coverage unknown) do, rather
// than call every shard missing (its Jobs may have completed already).
func TestMapNotJudged(t *testing.T) {
	const notJudged = "NOT JUDGED: the controller has written no status for this account yet"
	cases := []struct {
		name          string
		ba            *v1alpha1.BatchAccount
		wantNotJudged bool
		wantTitle     string
	}{
		{"no status", clitest.IJ245Account(), true, "BatchAccount ml-team/ij245: 4 shards, 0 covered, 0 accepted, 4 unknown\n"},
		{"judged", clitest.SeedSteps().Steps[0], false, "BatchAccount ml-team/ij245: 4 shards, 3 covered, 0 accepted, 1 missing\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clitest.FakeClient(tc.ba)
			out, errOut, code := run(t, c, "map", "ij245", "-n", ns, "--width", "80")
			if code != options.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			path := filepath.Join(t.TempDir(), "ij245.svg")
			if _, errOut, code := run(t, c, "map", "ij245", "-n", ns, "--svg", path); code != options.ExitOK {
				t.Fatalf("--svg: exit %d: %s", code, errOut)
			}
			svg, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, tc.wantTitle) || strings.Contains(out, notJudged) != tc.wantNotJudged || strings.Contains(string(svg), notJudged) != tc.wantNotJudged {
				t.Errorf("want the title %q and %q said: %v (in the SVG too):\n%s", tc.wantTitle, notJudged, tc.wantNotJudged, out)
			}
		})
	}
}

// TestMapInvalidMapping: the cells of an account whose mapping is no partition (a shard
// assigned twice, others to no index) are drawn by that mapping, so a Job's row may
// count a shard several times and leave others out; the map says the mapping is invalid,
// as the verdict (AssignmentInvalid) does, on a terminal and in the SVG.
func TestMapInvalidMapping(t *testing.T) {
	const invalid = "INVALID MAPPING: AssignmentValid is False (DuplicateShard): shard A is assigned twice"
	cases := []struct {
		name        string
		shards      []string
		wantInvalid bool
	}{
		{"a shard assigned four times", []string{"A", "A", "A", "A"}, true},
		{"a partition", []string{"A", "B", "C", "D"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := clitest.FailedJob()
			ba := clitest.IJ245Account()
			ba.Spec.Assignments[0].Shards = tc.shards
			ba = clitest.Compute(ba, clitest.FailedAt.Time, map[string]account.Observation{"job/j": {Job: jobkind.Facts(j)}})
			c := clitest.FakeClient(ba, j)
			out, errOut, code := run(t, c, "map", "ij245", "-n", ns, "--width", "80")
			if code != options.ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			path := filepath.Join(t.TempDir(), "ij245.svg")
			if _, errOut, code := run(t, c, "map", "ij245", "-n", ns, "--svg", path); code != options.ExitOK {
				t.Fatalf("--svg: exit %d: %s", code, errOut)
			}
			svg, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, invalid) != tc.wantInvalid || strings.Contains(string(svg), invalid) != tc.wantInvalid {
				t.Errorf("want %q said: %v (in the SVG too):\n%s", invalid, tc.wantInvalid, out)
			}
		})
	}
}
