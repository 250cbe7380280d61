package framework

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"batchledger.dev/batchledger/internal/testsupport/localcluster"
)

// The suite runs on two kinds of cluster. On the local control plane the GPU nodes are
// kwok's: pods run until a test finishes them through kwok's stages (FinishIndexPod and
// friends), so a test can play an exact history step by step. On kind the nodes run real
// kubelets: a pod's outcome comes from its container — the example worker image, scripted
// through its environment (pkg/worker's Plan) — and nothing may be finished by hand.
// Tests say which they need; the others skip, saying why.

// WorkerImageEnv names the example worker image on a cluster of real kubelets (default
// DefaultWorkerImage, which hack/kind/images.sh builds and `kind load`s).
const WorkerImageEnv = "E2E_WORKER_IMAGE"

// DefaultWorkerImage is the example worker image hack/kind builds.
const DefaultWorkerImage = "batchledger.dev/example-worker:e2e"

// detectKubelets records whether the cluster's schedulable nodes are kwok's.
func detectKubelets(ctx context.Context, c client.Client) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	env.kwokNodes = false
	for _, n := range nodes.Items {
		if _, ok := n.Annotations[localcluster.KwokNodeAnnotation]; ok {
			env.kwokNodes = true
		}
	}
	return nil
}

// KwokNodes reports whether pods run on kwok's nodes (the local control plane).
func KwokNodes() bool { return env.kwokNodes }

// WorkerImage is the example worker image to run on real kubelets.
func WorkerImage() string {
	if img := os.Getenv(WorkerImageEnv); img != "" {
		return img
	}
	return DefaultWorkerImage
}

// TestOption adjusts New.
type TestOption func(*testOptions)

type testOptions struct{ kwok, realKubelets bool }

// OnRealKubelets marks a test that needs pods run by real kubelets (kind): it skips on
// kwok nodes.
func OnRealKubelets() TestOption {
	return func(o *testOptions) { o.kwok, o.realKubelets = false, true }
}

// OnAnyKubelets marks a test that runs on either kind of node: it asks KwokNodes whether
// to finish its pods through kwok's stages or let the example worker run them.
func OnAnyKubelets() TestOption {
	return func(o *testOptions) { o.kwok, o.realKubelets = false, false }
}

// skipUnlessKubelets skips a test whose kind of node the cluster lacks. By default a test
// drives pods through kwok's stages, so it skips on real kubelets.
func skipUnlessKubelets(t *testing.T, opts []TestOption) {
	o := testOptions{kwok: true}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.kwok && !env.kwokNodes:
		t.Skip("drives its pods through kwok's stages (FinishIndexPod, CopyIndexPodAsSucceeded, ...): " +
			"this cluster's nodes run real kubelets; e2e/batchledger/kind_test.go covers the same ground with the example worker")
	case o.realKubelets && env.kwokNodes:
		t.Skip("needs real kubelets running the example worker image: run it on kind (make test-e2e-kind)")
	}
}
