#!/usr/bin/env python3
"""Tests of the replay's measuring tools: resample_trace.py and compare_runs.py
(the latter on real dpgate-replay output).

Usage: tools_test.py DPGATE_REPLAY_BINARY   (ctest: dpgate_replay_tools)
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from resample_trace import read_trace, resample  # noqa: E402

REPLAY = None
TINY = os.path.join(HERE, "tiny_trace.jsonl")


def families(requests):
    """first hash id -> the family's requests in time order."""
    out = {}
    for r in sorted(requests, key=lambda r: r["timestamp"]):
        out.setdefault(r["hash_ids"][0], []).append(r)
    return out


class ResampleTrace(unittest.TestCase):
    def setUp(self):
        self.source = read_trace(TINY)

    def test_keeps_the_number_of_families_and_each_familys_shape(self):
        original = {tuple((r["input_length"], len(r["hash_ids"])) for r in f) for f in families(self.source).values()}
        for seed in range(1, 30):
            drawn = families(resample(self.source, seed))
            self.assertEqual(len(drawn), len(families(self.source)))
            for family in drawn.values():
                # Lengths and block counts of one source family, turn by turn.
                self.assertIn(tuple((r["input_length"], len(r["hash_ids"])) for r in family), original)
                # Gaps kept: 30 s between the turns of every tiny family.
                gaps = [b["timestamp"] - a["timestamp"] for a, b in zip(family, family[1:])]
                self.assertEqual(gaps, [30000, 30000])
                # Append-only turns stay append-only.
                for a, b in zip(family, family[1:]):
                    self.assertEqual(b["hash_ids"][: len(a["hash_ids"])], a["hash_ids"])

    def test_copies_get_fresh_ids_and_stay_inside_the_span(self):
        for seed in range(1, 30):
            out = resample(self.source, seed)
            owners = {}
            for r in out:
                self.assertGreaterEqual(r["timestamp"], 0)
                self.assertLessEqual(r["timestamp"], 80000)
                for h in r["hash_ids"]:
                    owners.setdefault(h, set()).add(r["hash_ids"][0])
            self.assertTrue(all(len(o) == 1 for o in owners.values()), "a block id is shared between families")
            self.assertEqual([r["timestamp"] for r in out], sorted(r["timestamp"] for r in out))

    def test_the_seed_decides_the_draw(self):
        self.assertEqual(resample(self.source, 7), resample(self.source, 7))
        self.assertNotEqual(resample(self.source, 7), resample(self.source, 8))

    def test_command_line_writes_the_same_trace(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "resample_trace.py"), TINY, "5"],
                             check=True, capture_output=True, text=True).stdout
        self.assertEqual([json.loads(line) for line in out.splitlines()], resample(self.source, 5))


class CompareRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def per_request(self, policy, *extra):
        path = os.path.join(self.tmp.name, f"{policy}{len(extra)}.csv")
        subprocess.run([REPLAY, "--trace", TINY, "--cache-blocks", "64", "--policy", policy, "--per-request", path,
                        *extra], check=True, capture_output=True)
        return path

    def compare(self, a, b, *args):
        out = subprocess.run([sys.executable, os.path.join(HERE, "compare_runs.py"), a, b, *args],
                             capture_output=True, text=True)
        return out.returncode, (json.loads(out.stdout.splitlines()[-1]) if out.returncode == 0 else out.stderr)

    def test_the_replay_writes_one_row_per_request(self):
        with open(self.per_request("dpgate"), newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 9)
        # Idle system at 50,000 tokens/s: a first turn (1,024 tokens, nothing
        # cached) takes 20.48 ms; the last turns find 3 of 4 blocks cached.
        self.assertAlmostEqual(float(rows[0]["ttft_ms"]), 20.48, places=6)
        self.assertEqual([int(r["cached_blocks"]) for r in rows], [0, 0, 0, 2, 2, 2, 3, 3, 3])
        self.assertTrue(all(float(r["wait_ms"]) == 0 for r in rows))

    def test_caching_policy_is_lower_than_round_robin(self):
        code, result = self.compare(self.per_request("dpgate"), self.per_request("round-robin"), "--window-s", "10")
        self.assertEqual(code, 0, result)
        # Later turns: 1,536 - 1,024 and 2,048 - 1,536 tokens instead of the whole prompt.
        self.assertAlmostEqual(result["mean_diff_ms"], -(3 * 20.48 + 3 * 30.72) / 9, places=3)
        self.assertEqual(result["windows"], 9)
        self.assertLess(result["ci95_ms"][1], 0)
        self.assertEqual(result["verdict"], "A lower")

    def test_a_run_against_itself_is_not_distinguishable(self):
        path = self.per_request("dpgate")
        code, result = self.compare(path, path)
        self.assertEqual(code, 0, result)
        self.assertEqual(result["mean_diff_ms"], 0)
        self.assertEqual(result["ci95_ms"], [0, 0])
        self.assertEqual(result["verdict"], "not distinguishable")

    def test_runs_of_different_time_scales_are_refused(self):
        code, err = self.compare(self.per_request("dpgate"), self.per_request("dpgate", "--speedup", "2"))
        self.assertNotEqual(code, 0)
        self.assertIn("arrivals differ", err)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: tools_test.py DPGATE_REPLAY_BINARY")
    REPLAY = sys.argv.pop(1)
    unittest.main()
