// Package testsupport is the home of what the e2e tests and the programs under hack/
// share to run batchledger on a real control plane. It holds no code, only this note and
// the packages below it:
//
//   - localcluster: the local control plane (etcd, Kubernetes, kwok nodes, Kueue, JobSet,
//     the batchledger controller as one more manager);
//   - kwok: the kwok stages that play the kubelet of the fake GPU nodes, and the moves a
//     test makes on those pods;
//   - scrape: the one reader of a Prometheus text endpoint (the controller's metrics);
//   - report: the one writer of the tables and Markdown reports of bench and soak.
//
// Their users are e2e/framework (the e2e suites), hack/cluster, hack/demo, hack/bench,
// hack/soak and hack/installcheck. They used to live in e2e/framework/localcluster and
// hack/kwok, so e2e/ imported hack/ and hack/ imported e2e/: one library spread over two
// folders meant for other things (e2e/ holds tests, hack/ scripts and small programs).
//
// Why internal/testsupport rather than test/ (Kueue's and JobSet's test/util) or pkg/:
//
//   - internal/ is enforced by the compiler: no other module can import these packages,
//     so they may change with every test, as a harness should; pkg/ is the project's
//     library surface and the docker build context, which a test harness is not part of;
//   - "testsupport" says what it is, support for tests rather than tests: a test/ tree
//     beside e2e/ would read as a second test tier.
package testsupport
