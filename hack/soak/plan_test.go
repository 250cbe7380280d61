package main

import (
	"reflect"
	"testing"
	"time"
)

func TestNewPlanIsAFunctionOfTheSeed(t *testing.T) {
	o := PlanOptions{Seed: 42, Batches: 30, Kills: 25, MinGap: time.Second, MaxGap: 9 * time.Second}
	a, b := NewPlan(o), NewPlan(o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans of the same options differ")
	}
	o.Seed = 43
	if c := NewPlan(o); reflect.DeepEqual(a.Batches, c.Batches) && reflect.DeepEqual(a.Kills, c.Kills) {
		t.Fatal("seeds 42 and 43 gave the same plan")
	}
}

func TestNewPlanRunsEveryShapeFirst(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		p := NewPlan(PlanOptions{Seed: seed, Batches: len(AllShapes)})
		seen := map[Shape]int{}
		for _, b := range p.Batches {
			seen[b.Shape]++
		}
		for _, s := range AllShapes {
			if seen[s] != 1 {
				t.Errorf("seed %d: shape %s in %d of the first %d batches, want 1", seed, s, seen[s], len(AllShapes))
			}
		}
	}
}

func TestNewPlanRunsTheLedgerShapesFirst(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		p := NewPlan(PlanOptions{Seed: seed, Batches: len(LedgerShapes)})
		seen := map[Shape]bool{}
		for _, b := range p.Batches {
			seen[b.Shape] = true
		}
		for _, s := range LedgerShapes {
			if !seen[s] {
				t.Errorf("seed %d: shape %s not in the first %d batches", seed, s, len(LedgerShapes))
			}
		}
	}
}

func TestNewPlanSpreadsKillsOverComponents(t *testing.T) {
	p := NewPlan(PlanOptions{Seed: 7, Kills: 12, MinGap: 2 * time.Second, MaxGap: 5 * time.Second})
	per := map[string]int{}
	for _, k := range p.Kills {
		per[k.Component]++
		if k.After < 2*time.Second || k.After > 5*time.Second {
			t.Errorf("kill gap %s outside [2s, 5s]", k.After)
		}
	}
	for _, c := range KillComponents {
		if per[c] != 3 {
			t.Errorf("%s killed %d times of 12, want 3", c, per[c])
		}
	}
}

// planOf returns the first batch of the given shape of a 7-batch plan of seed.
func planOf(t *testing.T, seed uint64, shape Shape) BatchPlan {
	t.Helper()
	for _, b := range NewPlan(PlanOptions{Seed: seed, Batches: len(AllShapes)}).Batches {
		if b.Shape == shape {
			return b
		}
	}
	t.Fatalf("no %s batch", shape)
	return BatchPlan{}
}

func TestShapeFates(t *testing.T) {
	cases := []struct {
		name  string
		shape Shape
		check func(t *testing.T, b BatchPlan)
	}{
		{"a JobSet's first attempt succeeds workers-0 index 0 and fails workers-1 index 0, the second succeeds everything", ShapeJobSetRestart, func(t *testing.T, b BatchPlan) {
			want := map[FateKey]Fate{
				{"b-js-w-0", 0, 0, 0}: {Result: ResultGood},
				{"b-js-w-1", 0, 0, 0}: {Exit: 1},
				{"b-js-w-0", 1, 0, 0}: {Result: ResultGood},
				{"b-js-w-0", 1, 1, 0}: {Result: ResultGood},
				{"b-js-w-1", 1, 0, 0}: {Result: ResultGood},
				{"b-js-w-1", 1, 1, 0}: {Result: ResultGood},
			}
			if got := renamed(b); !reflect.DeepEqual(got, want) {
				t.Errorf("fates = %v, want %v", got, want)
			}
			if b.Targets[1].Key != "jobset/"+b.Name+"-js/w/1" || b.Targets[1].FirstShard != 2 || b.Shards != 4 {
				t.Errorf("targets %+v, shards %d", b.Targets, b.Shards)
			}
		}},
		{"the preempted Job's later indexes wait for the eviction, the preemptor is outside the account", ShapePreemption, func(t *testing.T, b BatchPlan) {
			r := resultKind(b)
			want := map[FateKey]Fate{
				{"b-low", 0, 0, 0}:    {Result: r},
				{"b-low", 0, 1, 0}:    {Result: r, Gate: GatePreempted},
				{"b-low", 0, 2, 0}:    {Result: r, Gate: GatePreempted},
				{"b-urgent", 0, 0, 0}: {},
				{"b-urgent", 0, 1, 0}: {},
			}
			if got := renamed(b); !reflect.DeepEqual(got, want) {
				t.Errorf("fates = %v, want %v", got, want)
			}
			if len(b.Targets) != 1 || b.Shards != 3 {
				t.Errorf("targets %+v, shards %d: the preemptor must not be a target", b.Targets, b.Shards)
			}
		}},
		{"the repeated index goes first, the others wait for its extra attempt", ShapeRepeat, func(t *testing.T, b BatchPlan) {
			r := resultKind(b)
			want := map[FateKey]Fate{
				{"b-j", 0, 0, 0}: {Result: r},
				{"b-j", 0, 1, 0}: {Result: r, Gate: GateExtraDone},
				{"b-j", 0, 2, 0}: {Result: r, Gate: GateExtraDone},
			}
			if got := renamed(b); !reflect.DeepEqual(got, want) || b.ExtraAttemptIndex != 0 {
				t.Errorf("fates = %v (extra on %d), want %v (extra on 0)", got, b.ExtraAttemptIndex, want)
			}
		}},
		{"a TTL Job requires results and is deleted 30s after it finishes", ShapeTTL, func(t *testing.T, b BatchPlan) {
			if b.TTL == nil || *b.TTL != 30 || !b.RequireResults || b.KillLeaderAtEnd {
				t.Errorf("TTL %v, requireResults %t, leader kill %t; want 30, true, false", b.TTL, b.RequireResults, b.KillLeaderAtEnd)
			}
		}},
		{"a TTL-0 Job is deleted at once, the leader killed before its last pod, every index succeeds first time", ShapeTTLZero, func(t *testing.T, b BatchPlan) {
			if b.TTL == nil || *b.TTL != 0 || !b.KillLeaderAtEnd {
				t.Errorf("TTL %v, leader kill %t; want 0, true", b.TTL, b.KillLeaderAtEnd)
			}
			for k, f := range b.Fates {
				if f.Exit != 0 || k.Attempt != 0 || f.Result != resultKind(b) {
					t.Errorf("fate %+v: %+v", k, f)
				}
			}
		}},
		{"two accounts require results on one Job", ShapeTwoAccounts, func(t *testing.T, b BatchPlan) {
			if got := b.Accounts(); len(got) != 2 || got[0] != b.Name || got[1] != b.Name+"-bis" || !b.RequireResults {
				t.Errorf("accounts %v, requireResults %t", got, b.RequireResults)
			}
		}},
		{"require-later: a coverage account at first, every pod reports, the last index waits for the switch", ShapeRequireLater, func(t *testing.T, b BatchPlan) {
			if !b.RequireLater || !b.RequireResults || b.TTL != nil {
				t.Errorf("requireLater %t, requireResults %t, TTL %v: want true, true, none (the pods must stay)", b.RequireLater, b.RequireResults, b.TTL)
			}
			last := b.Targets[0].Indexes - 1
			for k, f := range b.Fates {
				if f.Exit == 0 && f.Result != ResultGood {
					t.Errorf("fate %+v succeeds without a result", k)
				}
				if (f.Gate == GateRequired) != (k.Index == last) {
					t.Errorf("fate %+v: gate %q", k, f.Gate)
				}
			}
		}},
		{"graceful: index 0 succeeds while terminating, the Job replaces only failed pods", ShapeGraceful, func(t *testing.T, b BatchPlan) {
			f := b.Fates[FateKey{b.Targets[0].Job, 0, 0, 0}]
			if !f.Graceful || f.Exit != 0 || f.Result != ResultGood || !b.ReplaceOnFailure || !b.RequireResults {
				t.Errorf("index 0 fate %+v, replace on failure %t, requireResults %t", f, b.ReplaceOnFailure, b.RequireResults)
			}
			n := 0
			for _, f := range b.Fates {
				if f.Graceful {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d graceful fates, want 1", n)
			}
		}},
		{"rule edit: index 0 records first, the others wait for the edit; at most one short result", ShapeRuleEdit, func(t *testing.T, b BatchPlan) {
			short := 0
			for k, f := range b.Fates {
				if (k.Index == 0) != (f.Gate == "") || (k.Index > 0 && f.Gate != GateRuleTried) {
					t.Errorf("fate %+v: gate %q", k, f.Gate)
				}
				if f.Result == ResultShort {
					short++
					if k.Index == 0 {
						t.Errorf("index 0 reports short: no result recorded before the edit would be good")
					}
				}
			}
			if short > 1 || !b.RuleEdit || !b.RequireResults {
				t.Errorf("%d short results, rule edit %t", short, b.RuleEdit)
			}
		}},
		{"forger: index 0 records first, the others wait for the forgery; at most one wrong-model result", ShapeForger, func(t *testing.T, b BatchPlan) {
			wrong := 0
			for k, f := range b.Fates {
				if (k.Index == 0) != (f.Gate == "") || (k.Index > 0 && f.Gate != GateForged) {
					t.Errorf("fate %+v: gate %q", k, f.Gate)
				}
				if f.Result == ResultWrongModel {
					wrong++
				}
			}
			if wrong > 1 || !b.Forger || !b.RequireResults {
				t.Errorf("%d wrong results, forger %t", wrong, b.Forger)
			}
		}},
		{"namespace delete: its own namespace, some indexes finish, at least one still runs", ShapeNamespaceDelete, func(t *testing.T, b BatchPlan) {
			n := b.Targets[0].Indexes
			if !b.OwnNamespace || b.FinishBeforeDelete < 1 || b.FinishBeforeDelete >= n {
				t.Errorf("own namespace %t, %d of %d finish before the deletion", b.OwnNamespace, b.FinishBeforeDelete, n)
			}
			for k := range b.Fates {
				if k.Index >= b.FinishBeforeDelete {
					t.Errorf("index %d has a fate: it must still run when the namespace goes", k.Index)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, seed := range []uint64{1, 2, 3, 4} {
				tc.check(t, planOf(t, seed, tc.shape))
			}
		})
	}
}

func TestEveryIndexEndsInASuccess(t *testing.T) {
	p := NewPlan(PlanOptions{Seed: 11, Batches: 60})
	for _, b := range p.Batches {
		gen := 0
		if b.Shape == ShapeJobSetRestart {
			gen = 1
		}
		for _, tg := range b.Targets {
			for i := range tg.Indexes {
				if b.OwnNamespace && i >= b.FinishBeforeDelete {
					continue // running when its namespace is deleted
				}
				last := Fate{Exit: -1}
				for a := 0; ; a++ {
					f, ok := b.Fates[FateKey{tg.Job, gen, i, a}]
					if !ok {
						break
					}
					last = f
				}
				if last.Exit != 0 {
					t.Errorf("%s %s index %d: last planned attempt %+v does not succeed", b.Name, tg.Job, i, last)
				}
			}
		}
	}
}

func TestPodsRunBetweenOneAndMaxRunSeconds(t *testing.T) {
	for _, b := range NewPlan(PlanOptions{Seed: 5, Batches: 40}).Batches {
		for k, f := range b.Fates {
			if f.RunFor < time.Second || f.RunFor > MaxRunSeconds*time.Second {
				t.Errorf("%s %+v runs for %s, want 1s..%ds", b.Name, k, f.RunFor, MaxRunSeconds)
			}
		}
	}
}

// renamed returns the fates with the batch name replaced by "b" and no run time, for fixed
// expectations.
func renamed(b BatchPlan) map[FateKey]Fate {
	out := map[FateKey]Fate{}
	for k, f := range b.Fates {
		k.Job = "b" + k.Job[len(b.Name):]
		f.RunFor = 0
		out[k] = f
	}
	return out
}

func resultKind(b BatchPlan) string {
	if b.RequireResults {
		return ResultGood
	}
	return ResultNone
}
