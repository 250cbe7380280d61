// Package e2e holds batchledger's end-to-end tests. They run against a real control plane
// (see e2e/framework): by default a local one with the real Job controller, kube-scheduler,
// Kueue, JobSet and kwok GPU nodes, started once per test binary; with
// E2E_USE_EXISTING_CLUSTER=true, the cluster in KUBECONFIG.
//
//	go test -p 1 -count=1 -timeout 30m ./e2e/...
package e2e
