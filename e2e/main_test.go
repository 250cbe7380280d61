package e2e

import (
	"testing"

	"batchledger.dev/batchledger/e2e/framework"
)

// The seed's Jobs, JobSets and Kueue objects must behave as written once batchledger is
// installed: the suite runs with the controller and its webhooks in the cluster.
func TestMain(m *testing.M) { framework.SetupWithBatchledger(m) }
