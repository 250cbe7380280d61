// Package layering holds no code: its test pins the import rules between batchledger's
// packages, so that a change that breaks one fails `go test` instead of slowly eroding
// the design.
//
// The rules, from the bottom up:
//
//   - pkg/indexset (completion-index sets) imports only the standard library.
//   - pkg/result, the worker's message format, imports only the standard library: no
//     Kubernetes and no CEL code, so that a worker (pkg/worker, cmd/example-worker)
//     links nothing else.
//   - pkg/apis/batchledger/v1alpha1 (the API: kinds, reasons, annotations, target keys)
//     imports no batchledger package and no client code.
//   - pkg/account, the pure accounting core, imports the API, pkg/indexset and
//     Kubernetes' API types only: no client-go, no controller-runtime, no CEL.
//   - pkg/acceptance (reading and judging results) and pkg/relations (which objects
//     belong to which account) build on those; pkg/relations imports no controller,
//     webhook or CLI package.
//   - pkg/controller, pkg/webhook and pkg/cli use all of the above; the webhooks and the
//     CLI never import the controller.
package layering
