package e2e

import (
	"testing"

	"batchledger.dev/batchledger/e2e/framework"
)

func TestMain(m *testing.M) { framework.Setup(m) }
