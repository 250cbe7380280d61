package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"batchledger.dev/batchledger/pkg/account"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// TestGet lists accounts of a namespace, and of every namespace with -A.
func TestGet(t *testing.T) {
	s := seedSteps()
	pending := s.steps[0].DeepCopy()
	done := s.steps[3].DeepCopy()
	done.Name = "ij245-done"
	repaired, _, _ := repairedAccount()
	repaired.Name, repaired.CreationTimestamp = "ij245-repaired", metav1.NewTime(seedNow.Add(-26*time.Hour))
	// A large batch whose missing shards do not fit a column.
	big := wrappers.MakeBatchAccount("big", ns).ShardCount("shard-", 100000).AssignJobOrdinals("big", "0-99999", "0-99999").Obj()
	big.Generation, big.CreationTimestamp = 1, metav1.NewTime(seedNow.Add(-90*time.Second))
	bigJob := jobSnapshot("big", "uid-big", 100000, "0-9,20-29,40-49,60-69,80-89,100-109,120-129,140-149,160-169", 90, "5")
	big = compute(big, time0, map[string]account.Observation{"job/big": {Job: bigJob}})
	// An account the controller has not seen yet, in another namespace.
	fresh := wrappers.MakeBatchAccount("fresh", "vision").Shards("A").AssignJob("v", "0", "A").Obj()
	fresh.CreationTimestamp = metav1.NewTime(seedNow.Add(-3 * time.Second))
	c := fakeClient(pending, done, repaired, big, fresh)

	out, errOut, code := run(t, c, "get", "-n", ns)
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "get", []byte(out))

	out, _, _ = run(t, c, "get", "-A")
	golden(t, "get_all_namespaces", []byte(out))

	out, _, _ = run(t, c, "get", "ij245", "-n", ns)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "ij245 ") {
		t.Errorf("get ij245:\n%s", out)
	}
	_, errOut, code = run(t, c, "get", "nope", "-n", ns)
	if code != ExitError || !strings.Contains(errOut, `BatchAccount "nope" not found in namespace "ml-team"`) {
		t.Errorf("get nope: exit %d, %q", code, errOut)
	}
	out, errOut, code = run(t, c, "get", "-n", "empty")
	if code != ExitOK || out != "" || errOut != "No BatchAccounts found in namespace \"empty\".\n" {
		t.Errorf("get in an empty namespace: exit %d, %q, %q", code, out, errOut)
	}
}
