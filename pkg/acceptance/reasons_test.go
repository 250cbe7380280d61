package acceptance

import (
	"testing"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/result"
)

// TestMessageReasonsAreTheAPIs: the message format repeats the API's rejection reasons so
// that it links no Kubernetes code; a rejection it decides must record the API's word.
func TestMessageReasonsAreTheAPIs(t *testing.T) {
	for _, tc := range []struct{ format, api string }{
		{result.ReasonMissing, v1alpha1.RejectionMissingResult},
		{result.ReasonMalformed, v1alpha1.RejectionMalformed},
		{result.ReasonOversized, v1alpha1.RejectionOversized},
		{result.ReasonUnknownVersion, v1alpha1.RejectionUnknownSchemaVersion},
		{result.ReasonMissingField, v1alpha1.RejectionMissingField},
	} {
		if tc.format != tc.api {
			t.Errorf("the message format says %q where the API says %q", tc.format, tc.api)
		}
	}
}
