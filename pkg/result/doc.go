// Package result is the message format of the shard result a batchledger worker
// reports: the schema below, Decode (which verifies a message) and Encode (which writes
// one). It imports nothing but the standard library, no Kubernetes and no CEL code, so
// that a worker links only it (pkg/worker, cmd/example-worker). Reading the message from
// a pod and judging it against the account's acceptance rule is pkg/acceptance's work,
// and checking its claim against the assignment the account core's (pkg/account).
//
// # Why the termination message
//
// A worker reports its result in its container termination message: the file
// /dev/termination-log (the container's terminationMessagePath). The kubelet copies it
// into the pod status when the container exits, so the worker needs no API credentials
// and no extra RBAC, and the result lives exactly as long as the pod object that proves
// the completion.
//
// The controller reads the message of a succeeded pod only, from the container the pod
// or the account names (see pkg/acceptance).
//
// # Schema batchledger.dev/v1
//
// The message is one JSON object, UTF-8, smaller than 4096 bytes:
//
//	{
//	  "version": "batchledger.dev/v1",
//	  "shard": "part-00017",
//	  "inputRevision": "dataset@2024-06-01",
//	  "modelRevision": "model-v3.2",
//	  "output": "s3://bucket/run-42/part-00017.parquet",
//	  "digest": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
//	  "records": 120000,
//	  "valid": 119998,
//	  "durationSeconds": 812.5
//	}
//
// Fields:
//
//   - version (string, required): the schema version, exactly "batchledger.dev/v1".
//     A message of any other version is rejected as UnknownSchemaVersion, never guessed at.
//   - shard (string, required): the name of the data shard the worker processed. It must
//     be the shard the account assigns to the pod's (Job, completion index); a result
//     claiming another shard is rejected as ForgedClaim.
//   - inputRevision (string, required): the revision of the input data the worker read.
//     It must equal the account's spec.inputRevision.
//   - modelRevision (string, required): the revision of the code or model the worker
//     ran. It must equal the account's spec.modelRevision.
//   - output (string, optional): where the output is, e.g. an object-store URL. It is
//     recorded, not fetched.
//   - digest (string, required): a content digest of the output, e.g. "sha256:<hex>".
//     The first accepted result of a shard stands; a later result for the same shard with
//     another digest is recorded as a Conflict.
//   - records (integer, optional, default 0): records processed.
//   - valid (integer, optional, default 0): valid records; 0 <= valid <= records.
//   - any other field (any JSON value): kept and offered to the acceptance rule as
//     result.<name>, e.g. result.durationSeconds above. Integers become CEL int, other
//     numbers CEL double.
//
// Field names are case-sensitive and appear at most once. Required strings must be
// non-empty; a JSON null counts as absent.
//
// # Limits and rejections
//
// The kubelet truncates a termination message at 4096 bytes, so a message of 4096 bytes
// or more may have been cut short and is rejected as Oversized; keep results well below
// that and put large outputs in storage, reporting their location in output. The node
// also caps the messages of all of a pod's containers together at 12 KiB, so in a pod
// of many containers a shorter message may be cut: a cut JSON object is incomplete and
// rejected as Malformed, never read as a shorter result. Each
// rejection carries a reason (see the Reason constants) and a message that says what is
// wrong; they are recorded in the account's status.results.
//
// # Acceptance rule
//
// An account may declare spec.acceptance.rule, a CEL expression over the reported
// fields; pkg/acceptance documents what a rule sees.
//
// Workers written in Go can build the message with Encode; others write the JSON above.
// The JSON Schema schemas/result-v1.schema.json is generated from this package
// (hack/resultschema, `make generate`), and python/batchledger_worker.py builds and checks
// the message by the same rules in Python; tests here hold both to Decode.
package result
