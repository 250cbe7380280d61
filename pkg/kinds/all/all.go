// Package all registers every kind of target batchledger accounts for. A new kind is one
// directory under pkg/kinds implementing kinds.Kind, one entry here, and its API field;
// docs/architecture.md lists the rest a kind may need ("Adding a new target kind").
package all

import (
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/kinds/trainjob"
)

// Kinds are the kinds of target, in the order their keys are derived.
var Kinds = kinds.Registry{job.Kind{}, jobset.Kind{}, trainjob.Kind{}}
