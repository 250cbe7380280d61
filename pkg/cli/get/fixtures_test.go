package get

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/pkg/cli/internal/clitest"
)

// ns is the namespace of the seed's objects.
const ns = clitest.Namespace

// run executes get against c with args (starting with "get") and returns stdout,
// stderr and the exit code.
func run(t *testing.T, c client.Client, args ...string) (string, string, int) {
	t.Helper()
	return clitest.Run(t, c, NewCommand, args...)
}
