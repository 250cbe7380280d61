package main

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// podRec builds a PodRecord fluently.
type podRec struct{ PodRecord }

func pod(name, job string, uid types.UID, index int) *podRec {
	return &podRec{PodRecord{Pod: name, UID: types.UID("uid-" + name), Job: job, JobUID: uid, Index: index, Succeeded: true}}
}

func (p *podRec) failed() *podRec             { p.Succeeded = false; return p }
func (p *podRec) reports(kind string) *podRec { p.Result = kind; return p }
func (p *podRec) batch(n int) *podRec         { p.Batch = n; return p }
func (p *podRec) obj() PodRecord              { return p.PodRecord }

// jobRecs builds the Job records: name -> identities, each "uid=Terminal" ("uid=" running,
// "uid=gone" seen and then missing, its condition never seen).
func jobRecs(spec map[string][]string) map[string]*JobRecord {
	out := map[string]*JobRecord{}
	for name, ids := range spec {
		r := &JobRecord{Terminal: map[types.UID]string{}, Gone: map[types.UID]bool{}}
		for _, id := range ids {
			uid, term := id, ""
			for i := range id {
				if id[i] == '=' {
					uid, term = id[:i], id[i+1:]
				}
			}
			r.See(types.UID(uid))
			switch term {
			case "":
			case "gone":
				r.Gone[types.UID(uid)] = true
			default:
				r.Terminal[types.UID(uid)] = term
			}
		}
		out[name] = r
	}
	return out
}

// twoJobs is a batch of two Jobs of two indexes each (shards 0-1 and 2-3).
func twoJobs(require bool) *BatchPlan {
	return &BatchPlan{Name: "b000", Shards: 4, RequireResults: require, Targets: []Target{
		{Key: "job/j", Job: "j", Indexes: 2, FirstShard: 0},
		{Key: "job/k", Job: "k", Indexes: 2, FirstShard: 2},
	}}
}

func TestExpect(t *testing.T) {
	cases := []struct {
		name string
		b    *BatchPlan
		pods []PodRecord
		jobs map[string]*JobRecord
		want Expectation
	}{
		{
			name: "every index succeeded and both Jobs Complete: Accepted without results",
			b:    twoJobs(false),
			pods: []PodRecord{pod("j0", "j", "J", 0).obj(), pod("j1", "j", "J", 1).obj(), pod("k0", "k", "K", 0).obj(), pod("k1", "k", "K", 1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}, "k": {"K=Complete"}}),
			want: Expectation{Accepted: true, Covered: 4},
		},
		{
			name: "a failed attempt covers nothing; its retry does",
			b:    twoJobs(false),
			pods: []PodRecord{pod("j0", "j", "J", 0).failed().obj(), pod("j0b", "j", "J", 0).obj(), pod("j1", "j", "J", 1).obj(), pod("k0", "k", "K", 0).failed().obj(), pod("k1", "k", "K", 1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}, "k": {"K=Failed"}}),
			want: Expectation{Accepted: false, Covered: 3},
		},
		{
			name: "covered everywhere but one Job not terminated: not Accepted",
			b:    twoJobs(false),
			pods: []PodRecord{pod("j0", "j", "J", 0).obj(), pod("j1", "j", "J", 1).obj(), pod("k0", "k", "K", 0).obj(), pod("k1", "k", "K", 1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}, "k": {"K="}}),
			want: Expectation{Accepted: false, Covered: 4},
		},
		{
			name: "results required: a wrong-model result covers its shard but is not accepted",
			b:    twoJobs(true),
			pods: []PodRecord{pod("j0", "j", "J", 0).reports(ResultGood).obj(), pod("j1", "j", "J", 1).reports(ResultWrongModel).obj(),
				pod("k0", "k", "K", 0).reports(ResultGood).obj(), pod("k1", "k", "K", 1).reports(ResultGood).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}, "k": {"K=Complete"}}),
			want: Expectation{Accepted: false, Covered: 4, AcceptedShards: 3},
		},
		{
			name: "results required: a repeated attempt with the same result counts the shard once",
			b:    twoJobs(true),
			pods: []PodRecord{pod("j0", "j", "J", 0).reports(ResultGood).obj(), pod("j0x", "j", "J", 0).reports(ResultGood).obj(), pod("j1", "j", "J", 1).reports(ResultGood).obj(),
				pod("k0", "k", "K", 0).reports(ResultGood).obj(), pod("k1", "k", "K", 1).reports(ResultGood).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}, "k": {"K=Complete"}}),
			want: Expectation{Accepted: true, Covered: 4, AcceptedShards: 4},
		},
		{
			name: "a restart: only the current identity counts, the superseded one's success and result do not",
			b:    twoJobs(true),
			pods: []PodRecord{pod("old-j0", "j", "J1", 0).reports(ResultGood).obj(), pod("old-k0", "k", "K1", 0).failed().obj(),
				pod("j0", "j", "J2", 0).reports(ResultGood).obj(), pod("k0", "k", "K2", 0).reports(ResultGood).obj(), pod("k1", "k", "K2", 1).reports(ResultGood).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J1=Failed", "J2="}, "k": {"K1=Failed", "K2=Complete"}}),
			want: Expectation{Accepted: false, Covered: 3, AcceptedShards: 3},
		},
		{
			name: "a TTL-0 Job gone before its condition was seen, every index succeeded: Complete, and its record must say so",
			b:    ttlJob(0),
			pods: []PodRecord{pod("j0", "j", "J", 0).obj(), pod("j1", "j", "J", 1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=gone"}}),
			want: Expectation{Accepted: true, Covered: 2, Complete: []string{"job/j"}},
		},
		{
			name: "a TTL Job gone with an index never succeeded: Failed",
			b:    ttlJob(0),
			pods: []PodRecord{pod("j0", "j", "J", 0).obj(), pod("j1", "j", "J", 1).failed().obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=gone"}}),
			want: Expectation{Accepted: false, Covered: 1},
		},
		{
			name: "a Job without a TTL that is gone is not taken for finished",
			b:    &BatchPlan{Name: "b000", Shards: 2, Targets: []Target{{Key: "job/j", Job: "j", Indexes: 2}}},
			pods: []PodRecord{pod("j0", "j", "J", 0).obj(), pod("j1", "j", "J", 1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=gone"}}),
			want: Expectation{Accepted: false, Covered: 2},
		},
		{
			name: "a TTL Job seen Complete: its record must say Complete",
			b:    ttlJob(30),
			pods: []PodRecord{pod("j0", "j", "J", 0).obj(), pod("j1", "j", "J", 1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}}),
			want: Expectation{Accepted: true, Covered: 2, Complete: []string{"job/j"}},
		},
		{
			name: "results required: a short result (the edited rule would take it) is not accepted",
			b:    &BatchPlan{Name: "b000", Shards: 2, RequireResults: true, RuleEdit: true, Targets: []Target{{Key: "job/j", Job: "j", Indexes: 2}}},
			pods: []PodRecord{pod("j0", "j", "J", 0).reports(ResultGood).obj(), pod("j1", "j", "J", 1).reports(ResultShort).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}}),
			want: Expectation{Accepted: false, Covered: 2, AcceptedShards: 1},
		},
		{
			name: "pods of another batch are not this batch's",
			b:    twoJobs(false),
			pods: []PodRecord{pod("j0", "j", "J", 0).batch(1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}}),
			want: Expectation{Accepted: false, Covered: 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Expect(tc.b, tc.pods, tc.jobs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Expect = %s, want %s", got, tc.want)
			}
		})
	}
}

// ttlJob is a batch of one Job of two indexes with ttlSecondsAfterFinished ttl.
func ttlJob(ttl int32) *BatchPlan {
	return &BatchPlan{Name: "b000", Shards: 2, TTL: &ttl, Targets: []Target{{Key: "job/j", Job: "j", Indexes: 2}}}
}

func TestDifferencesOnTheTargetRecord(t *testing.T) {
	want := Expectation{Accepted: true, Covered: 2, Complete: []string{"job/j"}}
	cases := []struct {
		name     string
		terminal map[string]string
		want     []string
	}{
		{"recorded Complete", map[string]string{"job/j": "Complete"}, nil},
		{"recorded without its condition (deleted before it was seen)", map[string]string{"job/j": ""}, []string{`target job/j recorded "", want Complete`}},
		{"no record", nil, []string{`target job/j recorded "", want Complete`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Differences(want, Observed{Accepted: true, Covered: 2, Terminal: tc.terminal})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Differences = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestForgedCounted(t *testing.T) {
	cases := []struct {
		name         string
		realAccepted int
		realVerdict  bool
		got          Observed
		forgedIn     int
		want         bool
	}{
		{"the real verdict", 3, true, Observed{Accepted: true, AcceptedShards: 3}, 0, false},
		{"lagging behind the real pods", 2, false, Observed{AcceptedShards: 1}, 0, false},
		{"more shards accepted than real pods reported", 1, false, Observed{AcceptedShards: 3}, 0, true},
		{"Accepted on a wrong-model shard the forger covered", 2, false, Observed{Accepted: true, AcceptedShards: 2}, 0, true},
		{"a forged result in the manager's chunk", 3, true, Observed{Accepted: true, AcceptedShards: 3}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ForgedCounted(tc.realAccepted, tc.realVerdict, tc.got, tc.forgedIn); got != tc.want {
				t.Errorf("ForgedCounted = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestReleasedEarly(t *testing.T) {
	both := map[types.UID]bool{"a": true, "b": true}
	onlyA := map[types.UID]bool{"a": true}
	cases := []struct {
		name     string
		released []types.UID
		recorded []map[types.UID]bool
		want     []types.UID
	}{
		{"every account recorded them", []types.UID{"a", "b"}, []map[types.UID]bool{both, both}, nil},
		{"the second account had not recorded b", []types.UID{"a", "b"}, []map[types.UID]bool{both, onlyA}, []types.UID{"b"}},
		{"one account, nothing recorded", []types.UID{"a"}, []map[types.UID]bool{{}}, []types.UID{"a"}},
		{"nothing released", nil, []map[types.UID]bool{{}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReleasedEarly(tc.released, tc.recorded); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ReleasedEarly = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNamespaceStuck(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var never time.Time
	cases := []struct {
		name                        string
		deleted, ended, gone, judge time.Time
		want                        bool
	}{
		{"gone 5s after its pods ended", at(0), at(2), at(7), at(60), false},
		{"gone 31s after its pods ended", at(0), at(2), at(33), at(60), true},
		{"not gone yet, 10s after its pods ended", at(0), at(2), never, at(12), false},
		{"not gone 40s after its pods ended", at(0), at(2), never, at(42), true},
		{"gone before its pods were seen ending", at(0), never, at(3), at(60), false},
		{"pods still terminating a minute on", at(0), never, never, at(60), false},
		{"pods still terminating three minutes on", at(0), never, never, at(180), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NamespaceStuck(tc.deleted, tc.ended, tc.gone, tc.judge); got != tc.want {
				t.Errorf("NamespaceStuck = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestDifferences(t *testing.T) {
	want := Expectation{Accepted: true, Covered: 4, AcceptedShards: 4}
	if d := Differences(want, Observed{Accepted: true, Covered: 4, AcceptedShards: 4, Reason: "Accepted"}); d != nil {
		t.Errorf("a matching verdict differs: %v", d)
	}
	got := Differences(want, Observed{Accepted: false, Covered: 4, AcceptedShards: 3, Reason: "ResultsPending", Message: "3/4"})
	wantDiffs := []string{"Accepted=false, want true (ResultsPending: 3/4)", "accepted 3, want 4"}
	if !reflect.DeepEqual(got, wantDiffs) {
		t.Errorf("Differences = %q, want %q", got, wantDiffs)
	}
}

func TestCountResults(t *testing.T) {
	pods := []PodRecord{
		pod("j0", "j", "J", 0).reports(ResultGood).obj(),
		pod("j1", "j", "J", 1).reports(ResultWrongModel).obj(),
		pod("k0", "k", "K", 0).reports(ResultGood).obj(),
		pod("k1f", "k", "K", 1).failed().obj(),
		pod("k1", "k", "K", 1).obj(),
	}
	recorded := map[types.UID]int{"uid-j0": 1, "uid-j1": 2}
	got := CountResults(twoJobs(true), pods, recorded)
	want := ResultCount{Results: 3, Lost: []string{"k0"}, Twice: []string{"j1 (2 times)"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CountResults = %+v, want %+v", got, want)
	}
	if got := CountResults(twoJobs(false), nil, nil); got.Results != 0 || got.Lost != nil {
		t.Errorf("an account without required results counts %+v", got)
	}
}

func TestRefusedPattern(t *testing.T) {
	cases := []struct {
		line string
		want bool
	}{
		{`"error":"etcdserver: request is too large"`, true},
		{`BatchAccount.batchledger.dev "b" is invalid: status.shards.missing: Too long: may not be more than 4096 bytes`, true},
		{`the server responded with the status code 413 but did not return more information`, true},
		{`"msg":"Request Entity Too Large"`, true},
		{`"msg":"reconciled","account":"b413","resourceVersion":"41377"`, false},
		{`"msg":"BatchAccount b002: batchledger.dev/ShardsCovered=False: 0/4 shards covered"`, false},
	}
	for _, tc := range cases {
		if got := refusedPattern.MatchString(tc.line); got != tc.want {
			t.Errorf("refusedPattern.MatchString(%q) = %t, want %t", tc.line, got, tc.want)
		}
	}
}

func TestKillsDuring(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	kills := []KillRecord{{At: t0}, {At: t0.Add(10 * time.Second)}, {At: t0.Add(30 * time.Second)}}
	cases := []struct {
		name       string
		start, end time.Time
		want       int
	}{
		{"the bounds count", t0, t0.Add(10 * time.Second), 2},
		{"between kills", t0.Add(11 * time.Second), t0.Add(29 * time.Second), 0},
		{"after the last", t0.Add(31 * time.Second), t0.Add(40 * time.Second), 0},
	}
	for _, tc := range cases {
		if got := killsDuring(kills, tc.start, tc.end); got != tc.want {
			t.Errorf("%s: killsDuring = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The oracle judges from the driver's copy of its records: a TTL-0 Job seen go before
// its condition must still be gone there, or a Job the TTL controller deleted the moment
// it completed would be expected never to terminate.
func TestRecordsKeepTheJobsSeenGone(t *testing.T) {
	d := &driver{pods: map[types.UID]*PodRecord{}, jobs: jobRecs(map[string][]string{"j": {"J=gone"}})}
	for _, p := range []PodRecord{pod("j0", "j", "J", 0).obj(), pod("j1", "j", "J", 1).obj()} {
		d.pods[p.UID] = &p
	}
	pods, jobs := d.records()
	want := Expectation{Accepted: true, Covered: 2, Complete: []string{"job/j"}}
	if got := Expect(ttlJob(0), pods, jobs); !reflect.DeepEqual(got, want) {
		t.Errorf("Expect over the driver's records = %s, want %s", got, want)
	}
	jobs["j"].Gone[jobs["j"].Current()] = false
	if !d.jobs["j"].Gone[d.jobs["j"].Current()] {
		t.Error("records() shares its Gone map with the driver's own")
	}
}
