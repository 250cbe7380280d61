package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/utils/ptr"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
)

// Shape is the kind of batch a soak batch exercises.
type Shape string

// The batch shapes.
const (
	// ShapeJob is one Indexed Job; some indexes fail once before they succeed.
	ShapeJob Shape = "job"
	// ShapeCrossJob is one account over two Jobs.
	ShapeCrossJob Shape = "cross-job"
	// ShapeJobSetRestart is a JobSet of two child Jobs whose first attempt fails a pod
	// (backoffLimit 0), so the JobSet restarts (failurePolicy maxRestarts 1) with new
	// child Job identities.
	ShapeJobSetRestart Shape = "jobset-restart"
	// ShapePreemption is a low-priority Job on a small ClusterQueue, preempted by a
	// high-priority Job once one index succeeded, then re-admitted.
	ShapePreemption Shape = "preemption"
	// ShapeResults is one Job with results required; sometimes one shard reports a
	// result on the wrong model revision (the account must not be Accepted).
	ShapeResults Shape = "results"
	// ShapeRepeat is one Job with a second successful attempt on index 0.
	ShapeRepeat Shape = "repeated-attempts"
	// ShapeTTL is one Job with ttlSecondsAfterFinished: it is deleted after it completes
	// and the account's record of it must stand.
	ShapeTTL Shape = "ttl"
	// ShapeTwoAccounts is one Job with two accounts requiring results: each records every
	// result, and no pod is released before both did.
	ShapeTwoAccounts Shape = "two-accounts"
	// ShapeRequireLater is a coverage account whose pods report results anyway; once its
	// first index succeeded the driver turns requireResults on, and every result must be
	// read from the pods that are still there (no TTL: they stay).
	ShapeRequireLater Shape = "require-later"
	// ShapeGraceful is one Job (podReplacementPolicy Failed) one of whose running held pods
	// is deleted with a grace period and succeeds, with its result, while it terminates.
	ShapeGraceful Shape = "graceful-success"
	// ShapeRuleEdit is one Job with results required; once a result was recorded the
	// driver tries to edit the acceptance rule (it must be refused), and sometimes a later
	// shard reports a result that only the edited rule would accept.
	ShapeRuleEdit Shape = "rule-edit"
	// ShapeForger is one Job with results required beside a forger: a user whose
	// namespace Role grants batchledger.dev's every resource and verb creates a chunk of
	// forged results for every shard and tries to change the manager's chunks and the
	// account's status. Sometimes a later shard reports on the wrong model revision, so
	// that a forged result counted would turn the verdict.
	ShapeForger Shape = "forger"
	// ShapeNamespaceDelete is one Job in a namespace of its own, deleted while some held
	// pods finished and others run: it must be gone within NamespaceGoneWithin of its pods
	// ending.
	ShapeNamespaceDelete Shape = "namespace-delete"
	// ShapeTTLZero is one Job with ttlSecondsAfterFinished: 0; the batchledger leader is
	// killed just before its last pod finishes, so the Job completes and is deleted while
	// no replica leads. The account must record it Complete.
	ShapeTTLZero Shape = "ttl-zero"
)

// AllShapes lists every shape; the first len(AllShapes) batches of a plan use each once,
// the LedgerShapes first.
var AllShapes = append(append([]Shape(nil), CoreShapes...), LedgerShapes...)

// CoreShapes are the shapes of accounting: coverage, identities, attempts, records.
var CoreShapes = []Shape{ShapeJob, ShapeCrossJob, ShapeJobSetRestart, ShapePreemption, ShapeResults, ShapeRepeat, ShapeTTL}

// LedgerShapes are the shapes of the result ledger's promises: no valid path loses a
// result (several accounts, a switch to results, a graceful success, a namespace
// deletion, a Job gone while no replica leads) and Accepted cannot be forged (a rule
// edit, a forger). A plan runs them first, so that a short run covers each.
var LedgerShapes = []Shape{ShapeTwoAccounts, ShapeRequireLater, ShapeGraceful, ShapeRuleEdit, ShapeForger, ShapeNamespaceDelete, ShapeTTLZero}

// NamespaceGoneWithin bounds how long a deleted namespace may remain after its pods ended.
const NamespaceGoneWithin = 30 * time.Second

// Result kinds a worker reports in its termination message.
const (
	// ResultNone: no termination message.
	ResultNone = ""
	// ResultGood: a result for the pod's assigned shard on the account's revisions.
	ResultGood = "good"
	// ResultWrongModel: a result for the right shard on another model revision.
	ResultWrongModel = "wrong-model"
	// ResultShort: a result for the right shard whose valid records fall short of its
	// records: the soak's rule rejects it, the rule the rule-edit shape tries accepts it.
	ResultShort = "short"
)

// Gates hold pods until an event of their batch happened.
const (
	// GatePreempted opens once the low-priority Job was evicted (or the wait timed out).
	GatePreempted = "preempted"
	// GateExtraDone opens once the extra successful attempt was added.
	GateExtraDone = "extra-done"
	// GateRequired opens once requireResults was turned on (ShapeRequireLater).
	GateRequired = "required"
	// GateRuleTried opens once the rule edit was tried (ShapeRuleEdit).
	GateRuleTried = "rule-tried"
	// GateForged opens once the forger's writes were tried and the account was watched
	// for a while with the forged chunk in place (ShapeForger).
	GateForged = "forged"
)

// Fate is what the driver makes one pod do.
type Fate struct {
	// Exit is the container exit code: 0 succeeds the pod, anything else fails it.
	Exit int32
	// Result is the kind of termination message (ResultNone for none).
	Result string
	// Gate, when set, holds the pod Running until the batch's gate opened.
	Gate string
	// RunFor is how long the pod runs (since its start) before the driver finishes it, so
	// that batches last long enough for the kills to land in the middle of them.
	RunFor time.Duration
	// Graceful: the driver deletes the running pod with a grace period and then writes its
	// success (Exit 0, Result) as the kubelet of a worker that exits while terminating.
	Graceful bool
}

// FateKey names one attempt: the n-th pod the driver finishes for an index of one
// generation (JobSet restart attempt) of a Job.
type FateKey struct {
	Job     string
	Gen     int
	Index   int
	Attempt int
}

// Target is one account target and its assignment: indexes 0..Indexes-1 of Job (for a
// JobSet, the child Job name <jobset>-<rjob>-<i>) onto the shards starting at FirstShard.
type Target struct {
	// Key is the account's target key (v1alpha1.TargetKey).
	Key string
	// Job is the (child) Job name.
	Job string
	// Indexes is the number of completion indexes, all assigned.
	Indexes int
	// FirstShard is the ordinal of the shard index 0 is assigned to.
	FirstShard int
}

// BatchPlan is one batch: its account, its workload objects and every pod's fate.
type BatchPlan struct {
	// Num numbers the batch from 0.
	Num   int
	Shape Shape
	// Name is the account's name and the prefix of every object of the batch.
	Name    string
	Targets []Target
	// Shards is the number of declared shards (s0, s1, ...).
	Shards int
	// RequireResults: the account requires a result per shard.
	RequireResults bool
	// Fates of the pods; a pod without one is never finished by the driver (it stays
	// Running until its Job goes away).
	Fates map[FateKey]Fate
	// ExtraAttemptIndex is the index of the first target that gets a second successful
	// attempt (ShapeRepeat); -1 for none.
	ExtraAttemptIndex int
	// TTL is the Jobs' ttlSecondsAfterFinished (ShapeTTL, ShapeTTLZero); nil for none.
	TTL *int32
	// SecondAccount names a second account over the same targets with the same
	// criterion (ShapeTwoAccounts); "" for none.
	SecondAccount string
	// RequireLater: the account is created without an acceptance criterion and turned to
	// RequireResults once the first index succeeded (ShapeRequireLater). RequireResults
	// is the final criterion.
	RequireLater bool
	// RuleEdit: the driver tries to edit the acceptance rule once a result was recorded.
	RuleEdit bool
	// Forger: a forger writes into the account's ledger (ShapeForger).
	Forger bool
	// OwnNamespace: the batch runs in a namespace of its own, deleted mid-batch
	// (ShapeNamespaceDelete).
	OwnNamespace bool
	// FinishBeforeDelete is how many indexes (0..n-1) finish before the namespace is
	// deleted; the others are still running then.
	FinishBeforeDelete int
	// ReplaceOnFailure sets the Jobs' podReplacementPolicy to Failed (ShapeGraceful).
	ReplaceOnFailure bool
	// KillLeaderAtEnd: the batchledger leader is killed just before the last pod of the
	// batch is finished (ShapeTTLZero).
	KillLeaderAtEnd bool
	// Preemptor is the name of the high-priority Job (ShapePreemption), outside the account.
	Preemptor string
	// PreemptorIndexes is its completion count.
	PreemptorIndexes int
}

// ShardName is the name of shard ordinal o.
func ShardName(o int) string { return fmt.Sprintf("s%d", o) }

// Kill is one SIGKILL of the driver's schedule.
type Kill struct {
	// After is the wait since the previous kill's component was ready again (or the start).
	After time.Duration
	// Component is one of the Component* names.
	Component string
	// Replica picks the replica when no batchledger replica is leader at that moment.
	Replica int
}

// Components the driver kills.
const (
	ComponentBatchledger = "batchledger-leader"
	ComponentKueue       = "kueue"
	ComponentKCM         = "kube-controller-manager"
	ComponentAPIServer   = "kube-apiserver"
)

// KillComponents lists the killed components in table order.
var KillComponents = []string{ComponentBatchledger, ComponentKueue, ComponentKCM, ComponentAPIServer}

// Plan is a whole seeded soak run.
type Plan struct {
	Seed    uint64
	Batches []BatchPlan
	Kills   []Kill
}

// PlanOptions size a plan.
type PlanOptions struct {
	Seed           uint64
	Batches, Kills int
	// MinGap and MaxGap bound the wait between kills.
	MinGap, MaxGap time.Duration
}

// NewPlan draws a plan from the seed: the same options always give the same plan.
func NewPlan(o PlanOptions) Plan {
	rng := rand.New(rand.NewPCG(o.Seed, 0x50a6))
	p := Plan{Seed: o.Seed}
	ledger := append([]Shape(nil), LedgerShapes...)
	rng.Shuffle(len(ledger), func(i, j int) { ledger[i], ledger[j] = ledger[j], ledger[i] })
	core := append([]Shape(nil), CoreShapes...)
	rng.Shuffle(len(core), func(i, j int) { core[i], core[j] = core[j], core[i] })
	order := append(ledger, core...)
	for i := range o.Batches {
		shape := order[i%len(order)]
		if i >= len(order) {
			shape = AllShapes[rng.IntN(len(AllShapes))]
		}
		p.Batches = append(p.Batches, newBatch(rng, i, shape))
	}
	comps := []string{}
	for len(comps) < o.Kills {
		round := append([]string(nil), KillComponents...)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		comps = append(comps, round...)
	}
	span := max(int64(o.MaxGap-o.MinGap), 0)
	for i := range o.Kills {
		gap := o.MinGap
		if span > 0 {
			gap += time.Duration(rng.Int64N(span + 1))
		}
		p.Kills = append(p.Kills, Kill{After: gap, Component: comps[i], Replica: rng.IntN(2)})
	}
	return p
}

func newBatch(rng *rand.Rand, num int, shape Shape) BatchPlan {
	b := BatchPlan{Num: num, Shape: shape, Name: fmt.Sprintf("b%03d", num), Fates: map[FateKey]Fate{}, ExtraAttemptIndex: -1}
	// set plans one attempt, drawing how long it runs.
	set := func(k FateKey, f Fate) {
		f.RunFor = time.Duration(1+rng.IntN(MaxRunSeconds)) * time.Second
		b.Fates[k] = f
	}
	job := func(suffix string, n int) Target {
		t := Target{Job: b.Name + "-" + suffix, Indexes: n, FirstShard: b.Shards}
		t.Key = string(v1alpha1.JobTargetKey(t.Job))
		b.Shards += n
		b.Targets = append(b.Targets, t)
		return t
	}
	result := func() string {
		if b.RequireResults {
			return ResultGood
		}
		return ResultNone
	}
	// succeed gives every index of t one success, after a failure with probability pFail.
	succeed := func(t Target, gen int, pFail float64, gate string) {
		for i := range t.Indexes {
			a := 0
			if rng.Float64() < pFail {
				set(FateKey{t.Job, gen, i, a}, Fate{Exit: 1, Gate: gate})
				a++
			}
			set(FateKey{t.Job, gen, i, a}, Fate{Result: result(), Gate: gate})
		}
	}
	switch shape {
	case ShapeJob:
		b.RequireResults = rng.IntN(2) == 0
		succeed(job("j", 2+rng.IntN(3)), 0, 0.25, "")
	case ShapeCrossJob:
		b.RequireResults = rng.IntN(2) == 0
		succeed(job("j", 2), 0, 0.2, "")
		succeed(job("k", 2), 0, 0.2, "")
	case ShapeJobSetRestart:
		b.RequireResults = true
		for r := range 2 {
			t := Target{Job: fmt.Sprintf("%s-js-w-%d", b.Name, r), Indexes: 2, FirstShard: b.Shards}
			t.Key = string(v1alpha1.TargetRef{JobSet: b.Name + "-js", ReplicatedJob: "w", JobIndex: ptr.To(int32(r))}.Key())
			b.Shards += 2
			b.Targets = append(b.Targets, t)
			succeed(t, 1, 0, "")
		}
		// First attempt: workers-0 index 0 succeeds, workers-1 index 0 fails (backoffLimit
		// 0 fails the child Job, the JobSet restarts); the other pods are never finished.
		set(FateKey{b.Targets[0].Job, 0, 0, 0}, Fate{Result: result()})
		set(FateKey{b.Targets[1].Job, 0, 0, 0}, Fate{Exit: 1})
	case ShapePreemption:
		b.RequireResults = rng.IntN(2) == 0
		t := job("low", 3)
		set(FateKey{t.Job, 0, 0, 0}, Fate{Result: result()})
		for i := 1; i < 3; i++ {
			set(FateKey{t.Job, 0, i, 0}, Fate{Result: result(), Gate: GatePreempted})
		}
		b.Preemptor, b.PreemptorIndexes = b.Name+"-urgent", 2
		for i := range b.PreemptorIndexes {
			set(FateKey{b.Preemptor, 0, i, 0}, Fate{})
		}
	case ShapeResults:
		b.RequireResults = true
		t := job("j", 3+rng.IntN(2))
		succeed(t, 0, 0.2, "")
		if rng.IntN(2) == 0 {
			bad := rng.IntN(t.Indexes)
			for a := 0; ; a++ {
				f, ok := b.Fates[FateKey{t.Job, 0, bad, a}]
				if !ok {
					break
				}
				if f.Exit == 0 {
					f.Result = ResultWrongModel
					b.Fates[FateKey{t.Job, 0, bad, a}] = f
				}
			}
		}
	case ShapeRepeat:
		b.RequireResults = rng.IntN(2) == 0
		t := job("j", 3)
		succeed(t, 0, 0, GateExtraDone)
		set(FateKey{t.Job, 0, 0, 0}, Fate{Result: result()})
		b.ExtraAttemptIndex = 0
	case ShapeTTL:
		b.RequireResults = true
		b.TTL = ptr.To(int32(30))
		succeed(job("j", 2+rng.IntN(2)), 0, 0.2, "")
	case ShapeTwoAccounts:
		b.RequireResults = true
		b.SecondAccount = b.Name + "-bis"
		succeed(job("j", 2+rng.IntN(3)), 0, 0.25, "")
	case ShapeRequireLater:
		b.RequireResults, b.RequireLater = true, true
		t := job("j", 3+rng.IntN(2))
		// Every pod reports a result, required or not; the last index waits until the
		// criterion was turned on, the others may end before or after.
		set(FateKey{t.Job, 0, 0, 0}, Fate{Result: ResultGood})
		for i := 1; i < t.Indexes; i++ {
			gate := ""
			if i == t.Indexes-1 {
				gate = GateRequired
			}
			a := 0
			if rng.Float64() < 0.2 {
				set(FateKey{t.Job, 0, i, a}, Fate{Exit: 1, Gate: gate})
				a++
			}
			set(FateKey{t.Job, 0, i, a}, Fate{Result: ResultGood, Gate: gate})
		}
	case ShapeGraceful:
		b.RequireResults, b.ReplaceOnFailure = true, true
		t := job("j", 2+rng.IntN(2))
		set(FateKey{t.Job, 0, 0, 0}, Fate{Result: ResultGood, Graceful: true})
		for i := 1; i < t.Indexes; i++ {
			set(FateKey{t.Job, 0, i, 0}, Fate{Result: ResultGood})
		}
	case ShapeRuleEdit:
		b.RequireResults, b.RuleEdit = true, true
		t := job("j", 3)
		set(FateKey{t.Job, 0, 0, 0}, Fate{Result: ResultGood})
		short := -1
		if rng.IntN(2) == 0 {
			short = 1 + rng.IntN(t.Indexes-1)
		}
		for i := 1; i < t.Indexes; i++ {
			kind := ResultGood
			if i == short {
				kind = ResultShort
			}
			set(FateKey{t.Job, 0, i, 0}, Fate{Result: kind, Gate: GateRuleTried})
		}
	case ShapeForger:
		b.RequireResults, b.Forger = true, true
		t := job("j", 2+rng.IntN(2))
		set(FateKey{t.Job, 0, 0, 0}, Fate{Result: ResultGood})
		wrong := -1
		if rng.IntN(2) == 0 {
			wrong = 1 + rng.IntN(t.Indexes-1)
		}
		for i := 1; i < t.Indexes; i++ {
			kind := ResultGood
			if i == wrong {
				kind = ResultWrongModel
			}
			set(FateKey{t.Job, 0, i, 0}, Fate{Result: kind, Gate: GateForged})
		}
	case ShapeNamespaceDelete:
		b.RequireResults, b.OwnNamespace = true, true
		t := job("j", 3+rng.IntN(2))
		b.FinishBeforeDelete = 1 + rng.IntN(t.Indexes-1)
		// The later indexes have no fate: they are running when the namespace goes.
		for i := range b.FinishBeforeDelete {
			set(FateKey{t.Job, 0, i, 0}, Fate{Result: ResultGood})
		}
	case ShapeTTLZero:
		b.RequireResults = rng.IntN(2) == 0
		b.TTL = ptr.To(int32(0))
		b.KillLeaderAtEnd = true
		succeed(job("j", 2+rng.IntN(2)), 0, 0, "")
	}
	return b
}

// Accounts are the names of the batch's accounts.
func (b *BatchPlan) Accounts() []string {
	if b.SecondAccount != "" {
		return []string{b.Name, b.SecondAccount}
	}
	return []string{b.Name}
}

// MaxRunSeconds bounds how long a pod runs before the driver finishes it (from 1s).
const MaxRunSeconds = 5

// FailuresOf counts the planned failed attempts of a Job (its backoffLimit must allow them).
func (b *BatchPlan) FailuresOf(job string) int {
	n := 0
	for k, f := range b.Fates {
		if k.Job == job && f.Exit != 0 {
			n++
		}
	}
	return n
}
