package release

import "batchledger.dev/batchledger/pkg/cli/internal/clitest"

// ns is the namespace of the seed's objects.
const ns = clitest.Namespace
