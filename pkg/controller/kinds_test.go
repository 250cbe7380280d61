package controller

import (
	jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"
	trainjobkind "batchledger.dev/batchledger/pkg/kinds/trainjob"
)

// APIJobSet is JobSet's optional API, as the tests name it.
var APIJobSet = KindAPI(jobsetkind.Kind{})

// APITrainJob is Kubeflow Trainer's optional API, as the tests name it.
var APITrainJob = KindAPI(trainjobkind.Kind{})
