"""An example batch worker in Python that reports its shard result to batchledger.

It runs as `python3 /app/worker.py` in every pod of an Indexed Job; /app holds this file
and batchledger_worker.py (python/ in the batchledger repository), mounted from a
ConfigMap (see job.yaml). The pod is told its shard and revisions by batchledger's pod
webhook (annotations batchledger.dev/shard, input-revision, model-revision), which the
downward API hands to the container as BATCH_SHARD, BATCH_INPUT_REVISION and
BATCH_MODEL_REVISION: no copied shard list.
"""

import hashlib
import sys

import batchledger_worker as bl


def process(shard: str, input_revision: str, model_revision: str) -> tuple[str, str, int, int]:
    """The shard's work: replace with real inference. Returns where the output is, its
    digest, and the records processed and valid."""
    output = f"s3://batches/python-demo/{shard}.jsonl"
    data = f"{shard}\0{input_revision}\0{model_revision}".encode()
    return output, "sha256:" + hashlib.sha256(data).hexdigest(), 100, 100


def main() -> int:
    try:
        a = bl.assignment_from_env()
    except bl.AssignmentError as e:
        # Nothing written to the termination log: the pod fails and, with
        # terminationMessagePolicy FallbackToLogsOnError, `kubectl describe pod` shows this.
        print(f"worker: {e}", file=sys.stderr)
        return 1
    print(f"worker: shard {a.shard} (from {a.source}, account {a.account or '-'})")
    output, digest, records, valid = process(a.shard, a.input_revision, a.model_revision)
    # The last step, only once the work succeeded: build, check and write the result,
    # then exit 0 (the controller reads the message of a succeeded pod only).
    bl.report_success(a, digest=digest, output=output, records=records, valid=valid,
                      extra={"durationSeconds": 1.5})
    return 0


if __name__ == "__main__":
    sys.exit(main())
