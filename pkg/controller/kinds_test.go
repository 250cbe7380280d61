package controller

import jobsetkind "batchledger.dev/batchledger/pkg/kinds/jobset"

// APIJobSet is JobSet's optional API, as the tests name it.
var APIJobSet = KindAPI(jobsetkind.Kind{})
