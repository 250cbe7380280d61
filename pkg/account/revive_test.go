package account

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestIdentityBackFromARestartThatWasNone: a child not found while its owner runs is
// taken for a restart in progress, its identity superseded into history. When the same
// Job (same UID) is found again, no restart happened: it is the target's identity again,
// not a new one beside its own history entry. A child of another UID is a new identity,
// the superseded one staying in history.
func TestIdentityBackFromARestartThatWasNone(t *testing.T) {
	const key = "jobset/js/workers/0"
	spec := makeCompactSpec("s", 2).AssignJobSet("js", "workers", 0, "0-1", "0-1").SpecObj()
	first := makeJob("js-workers-0", "uid-a", 2).Completed("0", 1)
	cases := []struct {
		name        string
		back        Observation
		wantUID     types.UID
		wantHistory []types.UID
	}{
		{name: "the same Job found again", back: Observation{Job: makeJob("js-workers-0", "uid-a", 2).Completed("0-1", 2).Facts(), ChildOwner: OwnerRunning},
			wantUID: "uid-a"},
		{name: "the same Job given deleted at its owner's end", back: Observation{DeletedJob: makeJob("js-workers-0", "uid-a", 2).Completed("0-1", 2).Facts(),
			OwnerEnded: "Completed", ChildOwner: "Completed", ResultsOnWorker: true},
			wantUID: "uid-a"},
		{name: "a successor found", back: Observation{Job: makeJob("js-workers-0", "uid-b", 2).Facts(), RestartAttempt: 1, ChildOwner: OwnerRunning},
			wantUID: "uid-b", wantHistory: []types.UID{"uid-a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := step(t, spec, nil, map[string]Observation{key: {Job: first.Facts(), ChildOwner: OwnerRunning}}).Status
			st = step(t, spec, st.DeepCopy(), map[string]Observation{key: {ChildOwner: OwnerRunning}}).Status
			if len(st.History) != 1 {
				t.Fatalf("history %+v, want uid-a superseded", st.History)
			}
			st = step(t, spec, st.DeepCopy(), map[string]Observation{key: tc.back}).Status
			var history []types.UID
			for _, h := range st.History {
				history = append(history, h.UID)
			}
			if got := st.Targets[0].UID; got != tc.wantUID || len(history) != len(tc.wantHistory) || len(history) > 0 && history[0] != tc.wantHistory[0] {
				t.Errorf("target %s, history %v; want %s, history %v", got, history, tc.wantUID, tc.wantHistory)
			}
		})
	}
}
