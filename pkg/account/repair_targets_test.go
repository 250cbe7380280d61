package account

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRepairsBeyondMaxTargetsStayWithinTheAPI: spec.assignments (1,024 entries) and
// spec.repairs (1,024 more) are bounded apart, so an account whose assignments name
// 1,024 Jobs may be given a repair naming another Job (`kubectl batchledger repair`). Its
// status must still be one the API server admits (status.targets has MaxItems 1,024):
// refused, the account's status is never written again, so its verdict never moves, its
// Jobs' ends are never recorded (the record finalizer holds each one deleted for
// MaxRecordHold) and its held pods are let go only at MaxHold.
func TestRepairsBeyondMaxTargetsStayWithinTheAPI(t *testing.T) {
	w := makeCompactSpec("s", MaxTargets).RequireResults("")
	for i := range MaxTargets {
		w.AssignJobOrdinals(fmt.Sprintf("j%d", i), "0", fmt.Sprint(i))
	}
	w.SpecRepair("repair", "0", "s0")
	spec := w.SpecObj()
	out := Compute(Input{Namespace: "ml-team", Generation: 2, Spec: spec, Mapping: Compile("ml-team", spec),
		Previous: nil, Observations: map[string]Observation{}, Now: metav1.Now()})
	if err := withinAPIBounds(&out.Status); err != "" {
		t.Fatalf("the status breaks the API's bounds: %s", err)
	}
	// The webhook refuses the spec (validateSpec: the mapping's problems), saying why.
	if m := Compile("ml-team", spec); len(m.Problems) != 1 || !strings.Contains(m.Problems[0].Message, "repairs[0]") {
		t.Errorf("problems = %+v; want one naming repairs[0]", m.Problems)
	}
}
