"""Report a shard result to batchledger from a Python worker (standard library only).

A batchledger worker reports the shard it processed in its container termination
message, /dev/termination-log: one JSON object of schema "batchledger.dev/v1"
(schemas/result-v1.schema.json, generated from the Go package pkg/result, which is the
definition). This module builds that message, checks it by the same rules the controller
applies (pkg/result's Decode), and writes it; it also reads the shard the pod was told.

Typical use, as the last step of the worker::

    import batchledger_worker as bl

    a = bl.assignment_from_env()          # shard and revisions the account assigns
    output, digest, n, ok = process(a.shard, a.input_revision, a.model_revision)
    bl.report_success(a, digest=digest, output=output, records=n, valid=ok)
    # and exit 0: the controller reads the message of a succeeded pod only

What bites in Python, and what this module does about it:

* ``json.dumps`` writes ``NaN`` and ``Infinity``, which are not JSON: the controller
  rejects the message as Malformed. ``build_message`` refuses them (``allow_nan=False``).
* The kubelet truncates a termination message at 4096 bytes: a message that long is
  rejected as Oversized. ``build_message`` refuses it; report large outputs by location.
* Only one process may write the file, once, after its work succeeded: in a pod that
  runs several ranks (torchrun), ``report_success`` writes from local rank 0 only
  (``should_write``). On failure, write nothing and exit non-zero: set the container's
  ``terminationMessagePolicy: FallbackToLogsOnError`` to see the error in
  ``kubectl describe pod``.
* Counts are integers: ``records=1.0`` is refused, as the controller would.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Mapping, Optional

__all__ = [
    "SCHEMA_VERSION", "MAX_MESSAGE_BYTES", "TERMINATION_LOG",
    "ResultError", "Assignment", "AssignmentError",
    "build_message", "validate_message", "write_message", "should_write",
    "assignment_from_env", "report_success",
]

# pkg/result.SchemaVersion and MaxMessageBytes; a Go test feeds this module's messages
# to pkg/result's Decode so that the two cannot drift.
SCHEMA_VERSION = "batchledger.dev/v1"
MAX_MESSAGE_BYTES = 4096
TERMINATION_LOG = "/dev/termination-log"

# Rejection reasons, as pkg/result names them (they appear in the account's status).
REASON_MISSING = "MissingResult"
REASON_MALFORMED = "Malformed"
REASON_OVERSIZED = "Oversized"
REASON_UNKNOWN_VERSION = "UnknownSchemaVersion"
REASON_MISSING_FIELD = "MissingField"

# Field names, in schema order.
_STRING_FIELDS = ("shard", "inputRevision", "modelRevision", "output", "digest")
_REQUIRED = ("shard", "inputRevision", "modelRevision", "digest")
_COUNTS = ("records", "valid")
_KNOWN = frozenset(("version",) + _STRING_FIELDS + _COUNTS)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# Environment the worker reads. The shard, revisions and account come from the pod's
# annotations through the downward API (see docs/workers.md); BATCH_SHARDS and
# JOB_COMPLETION_INDEX are the fallback of a pod without them.
ENV_SHARD = "BATCH_SHARD"
ENV_INPUT_REVISION = "BATCH_INPUT_REVISION"
ENV_MODEL_REVISION = "BATCH_MODEL_REVISION"
ENV_ACCOUNT = "BATCH_ACCOUNT"
ENV_SHARDS = "BATCH_SHARDS"
ENV_INDEX = "JOB_COMPLETION_INDEX"


class ResultError(ValueError):
    """A message the controller would reject; ``reason`` is pkg/result's reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class AssignmentError(RuntimeError):
    """The pod was not told its shard, and has no fallback either."""


# --- the message -----------------------------------------------------------------


def build_message(*, shard: str, input_revision: str, model_revision: str, digest: str,
                  output: Optional[str] = None, records: int = 0, valid: int = 0,
                  extra: Optional[Mapping[str, Any]] = None) -> str:
    """Return the termination message reporting one shard result.

    Raises ResultError when the controller would reject it: a missing field, bad counts,
    an extra field named like a schema field, NaN or Infinity anywhere, or a message of
    MAX_MESSAGE_BYTES bytes or more. Fields are written in the order pkg/result's Encode
    writes them (schema fields, then extras by name).
    """
    for name, count in (("records", records), ("valid", valid)):
        if isinstance(count, bool) or not isinstance(count, int):
            raise ResultError(REASON_MALFORMED, f"field {name!r} must be an integer count, got {count!r}")
    obj: dict[str, Any] = {"version": SCHEMA_VERSION, "shard": shard, "inputRevision": input_revision,
                           "modelRevision": model_revision}
    if output:
        obj["output"] = output
    obj["digest"] = digest
    # Zero counts are left out: absent counts are zero (as Encode does).
    if records:
        obj["records"] = records
    if valid:
        obj["valid"] = valid
    for name in sorted(extra or {}):
        if name in _KNOWN:
            raise ResultError(REASON_MALFORMED, f"extra field {name!r} collides with the schema field of that name")
        obj[name] = extra[name]
    try:
        msg = json.dumps(obj, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except ValueError as e:  # NaN or Infinity
        raise ResultError(REASON_MALFORMED, f"{e}: JSON has no NaN or Infinity; report such a value as null or a string") from None
    except TypeError as e:
        raise ResultError(REASON_MALFORMED, str(e)) from None
    # Go's encoder escapes U+2028 and U+2029; do the same so the message is the one the
    # controller's re-encoding measures.
    msg = msg.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    validate_message(msg)
    return msg


def _reject_constant(name: str) -> Any:
    raise ResultError(REASON_MALFORMED, f"{name} is not JSON (json.dumps writes it unless allow_nan=False)")


def _parse_float(s: str) -> float:
    f = float(s)
    if math.isinf(f):
        raise ResultError(REASON_MALFORMED, f"the number {s} is out of range")
    return f


def _parse_int(s: str) -> int:
    n = int(s)
    if not _INT64_MIN <= n <= _INT64_MAX:
        _parse_float(s)  # a float then, as Go reads it, if it is in range
    return n


def _no_duplicates(pairs: list) -> dict:
    d: dict = {}
    for k, v in pairs:
        if k in d:
            raise ResultError(REASON_MALFORMED, f"field {k!r} appears more than once")
        d[k] = v
    return d


def validate_message(msg: str | bytes) -> dict:
    """Check a termination message as the controller does and return its fields.

    Raises ResultError with pkg/result's reason: MissingResult (empty), Oversized
    (MAX_MESSAGE_BYTES bytes or more), Malformed (not UTF-8, not one JSON object, a name
    repeated, NaN, wrong types, non-integer or impossible counts), UnknownSchemaVersion,
    MissingField (a required field absent, null or empty).

    One check of Decode is left out: a message of more than 2,047 bytes whose canonical
    re-encoding reaches the limit (one writing U+2028 raw hundreds of times) is Oversized
    there. build_message writes the canonical escapes itself, so its messages never hit it.
    """
    if isinstance(msg, str):
        try:
            raw = msg.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ResultError(REASON_MALFORMED, f"not valid UTF-8: {e}") from None
    else:
        raw = bytes(msg)
    if not raw.strip():
        raise ResultError(REASON_MISSING, "the termination message is empty")
    if len(raw) >= MAX_MESSAGE_BYTES:
        raise ResultError(REASON_OVERSIZED, f"the message is {len(raw)} bytes; the kubelet truncates termination messages at {MAX_MESSAGE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultError(REASON_MALFORMED, f"the result is not valid UTF-8 at byte {e.start}") from None
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                         parse_float=_parse_float, parse_int=_parse_int)
    except ResultError:
        raise
    except (ValueError, RecursionError) as e:
        raise ResultError(REASON_MALFORMED, f"invalid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise ResultError(REASON_MALFORMED, "the result must be a JSON object")
    version = obj.get("version")
    if version is None:
        raise ResultError(REASON_UNKNOWN_VERSION, f"the result has no 'version' field; want {SCHEMA_VERSION!r}")
    if not isinstance(version, str):
        raise ResultError(REASON_MALFORMED, "field 'version' must be a string")
    if version != SCHEMA_VERSION:
        raise ResultError(REASON_UNKNOWN_VERSION, f"schema version {version!r}; the controller understands only {SCHEMA_VERSION!r}")
    for name in _STRING_FIELDS:
        v = obj.get(name)
        if v is not None and not isinstance(v, str):
            raise ResultError(REASON_MALFORMED, f"field {name!r} must be a string")
    counts = {}
    for name in _COUNTS:
        v = obj.get(name)
        if v is None:
            counts[name] = 0
        elif isinstance(v, bool) or not isinstance(v, int) or not _INT64_MIN <= v <= _INT64_MAX:
            raise ResultError(REASON_MALFORMED, f"field {name!r} must be an integer count, found {v!r}")
        else:
            counts[name] = v
    missing = [n for n in _REQUIRED if not obj.get(n)]
    if missing:
        raise ResultError(REASON_MISSING_FIELD, "the result has no " + ", ".join(repr(n) for n in missing) + " (required, non-empty)")
    if counts["records"] < 0 or counts["valid"] < 0:
        raise ResultError(REASON_MALFORMED, f"the counts cannot be negative: records is {counts['records']}, valid is {counts['valid']}")
    if counts["valid"] > counts["records"]:
        raise ResultError(REASON_MALFORMED, f"valid ({counts['valid']}) exceeds records ({counts['records']})")
    return obj


def should_write(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process is the one that writes the pod's result: local rank 0 (or a
    process no launcher gave a rank). Several writers would overwrite one another."""
    return env.get("LOCAL_RANK", "0") in ("", "0")


def write_message(msg: str, path: Optional[str] = None) -> None:
    """Write a message built by build_message where the kubelet reads it: path, else
    $BATCH_TERMINATION_LOG, else /dev/termination-log (the container's
    terminationMessagePath). Call it once, after the work succeeded, then exit 0."""
    validate_message(msg)
    with open(path or os.environ.get("BATCH_TERMINATION_LOG") or TERMINATION_LOG, "w", encoding="utf-8") as f:
        f.write(msg)


# --- the assignment --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Assignment:
    """What the pod was told to process.

    source is "annotation" when the account's assignment reached the pod (through its
    batchledger.dev/* annotations and the downward API), "BATCH_SHARDS" when it was
    derived from the fallback list and the completion index."""

    shard: str
    input_revision: str
    model_revision: str
    account: str = ""
    source: str = "annotation"


def assignment_from_env(env: Mapping[str, str] = os.environ) -> Assignment:
    """Read the shard and revisions the pod was told.

    BATCH_SHARD (from the pod annotation batchledger.dev/shard) wins; without it the
    shard is the JOB_COMPLETION_INDEX-th entry of BATCH_SHARDS. An empty BATCH_SHARD means
    the annotation was absent: no account assigned this Job's index when the pod was
    created, or the webhook was not reachable (it fails open). Raises AssignmentError
    saying so when there is no fallback either.
    """
    inp, model = env.get(ENV_INPUT_REVISION, ""), env.get(ENV_MODEL_REVISION, "")
    shard = env.get(ENV_SHARD, "").strip()
    if shard:
        return Assignment(shard, inp, model, env.get(ENV_ACCOUNT, ""), "annotation")
    shards = [s.strip() for s in env.get(ENV_SHARDS, "").split(",") if s.strip()]
    if not shards:
        raise AssignmentError(
            f"{ENV_SHARD} is empty: the pod has no batchledger.dev/shard annotation (no BatchAccount assigned "
            f"this Job's completion index when the pod was created, or the batchledger webhook was unreachable), "
            f"and there is no {ENV_SHARDS} fallback")
    try:
        index = int(env.get(ENV_INDEX, ""))
    except ValueError:
        raise AssignmentError(f"{ENV_INDEX}={env.get(ENV_INDEX, '')!r}: not a completion index (is the Job Indexed?)") from None
    if not 0 <= index < len(shards):
        raise AssignmentError(f"index {index} has no shard in {ENV_SHARDS} ({len(shards)} shards)")
    return Assignment(shards[index], inp, model, env.get(ENV_ACCOUNT, ""), ENV_SHARDS)


def report_success(assignment: Assignment, *, digest: str, output: Optional[str] = None,
                   records: int = 0, valid: int = 0, extra: Optional[Mapping[str, Any]] = None,
                   path: Optional[str] = None, env: Mapping[str, str] = os.environ) -> Optional[str]:
    """Build the result of the assigned shard and write it, from the writing rank only.

    Returns the message written, or None on a rank that does not write. Raises
    ResultError (before writing anything) when the controller would reject the message.
    """
    msg = build_message(shard=assignment.shard, input_revision=assignment.input_revision,
                        model_revision=assignment.model_revision, digest=digest, output=output,
                        records=records, valid=valid, extra=extra)
    if not should_write(env):
        return None
    write_message(msg, path)
    return msg


def _main(argv: list[str]) -> int:
    """`python3 batchledger_worker.py validate < message`: check a message as the
    controller would; exit 1 with the reason when it would be rejected."""
    import sys
    if argv[1:] != ["validate"]:
        print("usage: batchledger_worker.py validate < message", file=sys.stderr)
        return 2
    try:
        validate_message(sys.stdin.buffer.read())
    except ResultError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv))
