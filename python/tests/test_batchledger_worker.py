"""Tests of batchledger_worker (run: make test-python, or python3 -m unittest discover -s python)."""

import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import batchledger_worker as bl  # noqa: E402

OK = dict(shard="part-00017", input_revision="in-1", model_revision="m-3", digest="sha256:00")


class BuildMessageTest(unittest.TestCase):
    def test_writes_schema_fields_in_order_then_extras_by_name(self):
        msg = bl.build_message(shard="a", input_revision="i", model_revision="m", digest="d", records=2, valid=1,
                               extra={"z": 1, "a": 2.0, "html": "<&>"})
        # The same bytes as pkg/result's TestEncodeFormat.
        self.assertEqual(msg, '{"version":"batchledger.dev/v1","shard":"a","inputRevision":"i","modelRevision":"m",'
                              '"digest":"d","records":2,"valid":1,"a":2.0,"html":"<&>","z":1}')

    def test_output_and_zero_counts(self):
        obj = json.loads(bl.build_message(output="s3://b/k", **OK))
        self.assertEqual(obj["output"], "s3://b/k")
        self.assertNotIn("records", obj)

    def test_refuses(self):
        cases = {
            "NaN": (dict(extra={"loss": float("nan")}), bl.REASON_MALFORMED, "NaN"),
            "Infinity nested": (dict(extra={"m": {"x": [math.inf]}}), bl.REASON_MALFORMED, "NaN or Infinity"),
            "missing digest": (dict(digest=""), bl.REASON_MISSING_FIELD, "'digest'"),
            "valid > records": (dict(records=1, valid=2), bl.REASON_MALFORMED, "exceeds"),
            "negative": (dict(records=-1), bl.REASON_MALFORMED, "negative"),
            "float count": (dict(records=1.0), bl.REASON_MALFORMED, "integer count"),
            "bool count": (dict(records=True), bl.REASON_MALFORMED, "integer count"),
            "extra shadows schema field": (dict(extra={"shard": "b"}), bl.REASON_MALFORMED, "collides"),
            "too large": (dict(output="x" * bl.MAX_MESSAGE_BYTES), bl.REASON_OVERSIZED, "4096"),
            "large once encoded": (dict(output="é" * (bl.MAX_MESSAGE_BYTES // 2)), bl.REASON_OVERSIZED, "truncates"),
            "not JSON": (dict(extra={"s": {1, 2}}), bl.REASON_MALFORMED, "set"),
        }
        for name, (override, reason, says) in cases.items():
            with self.subTest(name):
                with self.assertRaises(bl.ResultError) as cm:
                    bl.build_message(**{**OK, **override})
                self.assertEqual(cm.exception.reason, reason, str(cm.exception))
                self.assertIn(says, str(cm.exception))

    def test_at_the_limit(self):
        base = len(bl.build_message(output="x", **OK).encode())
        msg = bl.build_message(output="x" * (1 + bl.MAX_MESSAGE_BYTES - 1 - base), **OK)
        self.assertEqual(len(msg.encode()), bl.MAX_MESSAGE_BYTES - 1)
        with self.assertRaises(bl.ResultError):
            bl.build_message(output="x" * (1 + bl.MAX_MESSAGE_BYTES - base), **OK)


class ValidateMessageTest(unittest.TestCase):
    def test_reasons(self):
        v = '"version":"batchledger.dev/v1"'
        ok = v + ',"shard":"a","inputRevision":"i","modelRevision":"m","digest":"d"'
        cases = {
            "valid": ("{" + ok + "}", None),
            "empty": ("", bl.REASON_MISSING),
            "oversized": ("{" + ok + ',"pad":"' + "x" * 4096 + '"}', bl.REASON_OVERSIZED),
            "NaN literal": ("{" + ok + ',"x":NaN}', bl.REASON_MALFORMED),
            "duplicate": ("{" + ok + ',"shard":"b"}', bl.REASON_MALFORMED),
            "no version": ('{"shard":"a"}', bl.REASON_UNKNOWN_VERSION),
            "other version": ('{"version":"batchledger.dev/v2"}', bl.REASON_UNKNOWN_VERSION),
            "null shard": ('{' + v + ',"shard":null,"inputRevision":"i","modelRevision":"m","digest":"d"}', bl.REASON_MISSING_FIELD),
            "count 1.0": ("{" + ok + ',"records":1.0}', bl.REASON_MALFORMED),
            "count too big": ("{" + ok + ',"records":9223372036854775808}', bl.REASON_MALFORMED),
            "number out of range": ("{" + ok + ',"x":1e999}', bl.REASON_MALFORMED),
            "invalid UTF-8": (b'{"version":"\xff"}', bl.REASON_MALFORMED),
            "array": ("[]", bl.REASON_MALFORMED),
        }
        for name, (msg, reason) in cases.items():
            with self.subTest(name):
                if reason is None:
                    bl.validate_message(msg)
                    continue
                with self.assertRaises(bl.ResultError) as cm:
                    bl.validate_message(msg)
                self.assertEqual(cm.exception.reason, reason, str(cm.exception))


class AssignmentTest(unittest.TestCase):
    def test_annotation_wins_over_the_list(self):
        a = bl.assignment_from_env({"BATCH_SHARD": "R7", "BATCH_SHARDS": "A,B", "JOB_COMPLETION_INDEX": "1",
                                    "BATCH_INPUT_REVISION": "D", "BATCH_MODEL_REVISION": "m", "BATCH_ACCOUNT": "ij245"})
        self.assertEqual(a, bl.Assignment("R7", "D", "m", "ij245", "annotation"))

    def test_falls_back_to_the_list(self):
        a = bl.assignment_from_env({"BATCH_SHARD": "", "BATCH_SHARDS": "A, B", "JOB_COMPLETION_INDEX": "1"})
        self.assertEqual((a.shard, a.source), ("B", "BATCH_SHARDS"))

    def test_fails_clearly(self):
        cases = {
            "no annotation, no list": ({"JOB_COMPLETION_INDEX": "0"}, "no batchledger.dev/shard annotation"),
            "index outside the list": ({"BATCH_SHARDS": "A", "JOB_COMPLETION_INDEX": "3"}, "index 3 has no shard"),
            "not Indexed": ({"BATCH_SHARDS": "A"}, "is the Job Indexed?"),
        }
        for name, (env, says) in cases.items():
            with self.subTest(name), self.assertRaises(bl.AssignmentError) as cm:
                bl.assignment_from_env(env)
            self.assertIn(says, str(cm.exception))


class ReportSuccessTest(unittest.TestCase):
    def setUp(self):
        fd, self.path = tempfile.mkstemp()
        os.close(fd)
        self.addCleanup(os.remove, self.path)
        self.a = bl.Assignment("A", "D", "m")

    def read(self):
        with open(self.path, encoding="utf-8") as f:
            return f.read()

    def test_writes_the_message(self):
        msg = bl.report_success(self.a, digest="d", records=3, valid=3, path=self.path, env={})
        self.assertEqual(self.read(), msg)
        self.assertEqual(json.loads(msg)["shard"], "A")

    def test_only_local_rank_zero_writes(self):
        self.assertIsNone(bl.report_success(self.a, digest="d", path=self.path, env={"LOCAL_RANK": "1"}))
        self.assertEqual(self.read(), "")
        self.assertIsNotNone(bl.report_success(self.a, digest="d", path=self.path, env={"LOCAL_RANK": "0"}))

    def test_nothing_written_for_a_rejected_result(self):
        with self.assertRaises(bl.ResultError):
            bl.report_success(self.a, digest="d", extra={"loss": float("nan")}, path=self.path, env={})
        self.assertEqual(self.read(), "")


if __name__ == "__main__":
    unittest.main()
