package controller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"batchledger.dev/batchledger/pkg/apis/batchledger/v1alpha1"
	"batchledger.dev/batchledger/pkg/scheme"
	"batchledger.dev/batchledger/pkg/testing/wrappers"
)

// request is what the fake API server received.
type request struct {
	Method, Path, Query, ContentType string
	Body                             map[string]any
}

// TestRESTWriter: the manager's writes are the requests the API server expects (a
// status PUT at the read resourceVersion, a forced server-side apply under our field
// manager with the Workload's UID, a chunk's POST when new and PUT at the read
// resourceVersion when stored), their answers are never decoded (a body no decoder
// could read is no error), and the API server's refusals keep their kind (a conflict, a
// missing object), which the reconciler tells apart.
func TestRESTWriter(t *testing.T) {
	ba := wrappers.MakeBatchAccount("acct", "ns").Shards("A").AssignJob("j", "0", "A").
		Condition(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonShardsMissing, "0/1 shards covered", testNow).Obj()
	ba.ResourceVersion = "42"
	ac := kueueac.Workload("job-j", "ns").WithUID(types.UID("wl-uid")).WithStatus(kueueac.WorkloadStatus().WithConditions(
		metav1ac.Condition().WithType("batchledger.dev/Accepted").WithStatus(metav1.ConditionFalse).WithReason("ShardsMissing")))
	newChunkOf := func() *v1alpha1.ShardResults {
		c := newChunk(ba, chunkName(ba.UID, "0", 0), 0)
		c.Results = []v1alpha1.RecordedResult{{Ordinal: 0, Shard: "A", Target: "job/j", Pod: "j-0", PodUID: "j-0-uid"}}
		return c
	}
	storedChunk := newChunkOf()
	storedChunk.ResourceVersion = "7"
	writes := []struct {
		name  string
		write func(Writer) error
		want  request
	}{
		{
			name:  "account status",
			write: func(w Writer) error { return w.UpdateAccountStatus(context.Background(), ba) },
			want: request{Method: http.MethodPut, Path: "/apis/batchledger.dev/v1alpha1/namespaces/ns/batchaccounts/acct/status",
				ContentType: "application/json"},
		},
		{
			name:  "Workload conditions",
			write: func(w Writer) error { return w.ApplyWorkloadStatus(context.Background(), ac) },
			want: request{Method: http.MethodPatch, Path: "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/job-j/status",
				Query: "fieldManager=batchledger&force=true", ContentType: "application/apply-patch+yaml"},
		},
		{
			name:  "a new chunk",
			write: func(w Writer) error { return w.WriteChunk(context.Background(), newChunkOf()) },
			want: request{Method: http.MethodPost, Path: "/apis/batchledger.dev/v1alpha1/namespaces/ns/shardresults",
				ContentType: "application/json"},
		},
		{
			name:  "a stored chunk",
			write: func(w Writer) error { return w.WriteChunk(context.Background(), storedChunk) },
			want: request{Method: http.MethodPut, Path: "/apis/batchledger.dev/v1alpha1/namespaces/ns/shardresults/" + storedChunk.Name,
				ContentType: "application/json"},
		},
	}
	answers := []struct {
		name    string
		code    int
		body    string
		wantErr func(error) bool
	}{
		{"an answer nobody decodes", http.StatusOK, "not an object", func(err error) bool { return err == nil }},
		{"a conflict", http.StatusConflict, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409}`, apierrors.IsConflict},
		{"a missing object", http.StatusNotFound, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, apierrors.IsNotFound},
	}
	for _, wr := range writes {
		for _, a := range answers {
			t.Run(wr.name+", "+a.name, func(t *testing.T) {
				var got request
				srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					got = request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type")}
					b, _ := io.ReadAll(r.Body)
					if err := json.Unmarshal(b, &got.Body); err != nil {
						t.Errorf("request body is no JSON: %v: %s", err, b)
					}
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(a.code)
					_, _ = io.WriteString(rw, a.body)
				}))
				defer srv.Close()
				w, err := NewRESTWriter(&rest.Config{Host: srv.URL}, srv.Client(), scheme.Must())
				if err != nil {
					t.Fatal(err)
				}
				if err := wr.write(w); !a.wantErr(err) {
					t.Errorf("write = %v", err)
				}
				body := got.Body
				got.Body = nil
				if diff := cmp.Diff(wr.want, got); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				meta, _ := body["metadata"].(map[string]any)
				switch {
				case strings.HasSuffix(wr.want.Path, "/shardresults"):
					if body["kind"] != "ShardResults" || body["apiVersion"] != "batchledger.dev/v1alpha1" || meta["resourceVersion"] != nil || body["results"] == nil {
						t.Errorf("create body lacks kind, apiVersion or the results, or has a resourceVersion: %v", body)
					}
				case strings.Contains(wr.want.Path, "/shardresults/"):
					if body["kind"] != "ShardResults" || meta["resourceVersion"] != "7" || body["results"] == nil {
						t.Errorf("update body lacks kind, the read resourceVersion or the results: %v", body)
					}
				case wr.want.Method == http.MethodPut:
					if body["kind"] != "BatchAccount" || body["apiVersion"] != "batchledger.dev/v1alpha1" || meta["resourceVersion"] != "42" || body["status"] == nil {
						t.Errorf("status body lacks kind, apiVersion, the read resourceVersion or the status: %v", body)
					}
				case wr.want.Method == http.MethodPatch:
					if body["kind"] != "Workload" || meta["uid"] != "wl-uid" || body["status"] == nil {
						t.Errorf("apply body lacks kind, the Workload's UID or the conditions: %v", body)
					}
				}
			})
		}
	}
}
