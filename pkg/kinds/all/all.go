// Package all registers every kind of target batchledger accounts for. A new kind is one
// directory under pkg/kinds implementing kinds.Kind, and one entry here.
package all

import (
	"batchledger.dev/batchledger/pkg/kinds"
	"batchledger.dev/batchledger/pkg/kinds/job"
	"batchledger.dev/batchledger/pkg/kinds/jobset"
	"batchledger.dev/batchledger/pkg/kinds/trainjob"
)

// Kinds are the kinds of target, in the order their keys are derived.
var Kinds = kinds.Registry{job.Kind{}, jobset.Kind{}, trainjob.Kind{}}
