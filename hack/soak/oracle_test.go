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

// jobRecs builds the Job records: name -> identities, each "uid=Terminal" ("uid=" running).
func jobRecs(spec map[string][]string) map[string]*JobRecord {
	out := map[string]*JobRecord{}
	for name, ids := range spec {
		r := &JobRecord{Terminal: map[types.UID]string{}}
		for _, id := range ids {
			uid, term := id, ""
			for i := range id {
				if id[i] == '=' {
					uid, term = id[:i], id[i+1:]
				}
			}
			r.See(types.UID(uid))
			if term != "" {
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
			name: "pods of another batch are not this batch's",
			b:    twoJobs(false),
			pods: []PodRecord{pod("j0", "j", "J", 0).batch(1).obj()},
			jobs: jobRecs(map[string][]string{"j": {"J=Complete"}}),
			want: Expectation{Accepted: false, Covered: 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Expect(tc.b, tc.pods, tc.jobs); got != tc.want {
				t.Errorf("Expect = %s, want %s", got, tc.want)
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
