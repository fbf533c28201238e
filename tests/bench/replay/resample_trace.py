#!/usr/bin/env python3
"""Draws a new Mooncake-format trace from an existing one, to measure routing
on many workloads of the same kind rather than on one file.

A *family* is every request whose first hash id (its system prompt) is the
same; in the Mooncake trace no block id is shared between families. The new
trace has as many families as the old one, drawn with replacement. Each drawn
family keeps its requests, their order, their gaps and their prompt lengths,
gets fresh block ids (so two copies of one family do not share a cache), and
is shifted in time by a random offset that keeps it inside the trace's span.

Usage: resample_trace.py TRACE SEED > NEW_TRACE
"""
import json
import random
import sys
from collections import defaultdict


def resample(requests, seed):
    """The new trace's requests (dicts in Mooncake form), sorted by timestamp."""

    families = defaultdict(list)
    for r in requests:
        families[r["hash_ids"][0]].append(r)
    families = list(families.values())
    start = min(r["timestamp"] for r in requests)
    end = max(r["timestamp"] for r in requests)

    rng = random.Random(seed)
    out = []
    next_id = 0
    for _ in range(len(families)):
        family = families[rng.randrange(len(families))]
        first = min(r["timestamp"] for r in family)
        last = max(r["timestamp"] for r in family)
        offset = rng.uniform(start - first, end - last)
        fresh = {}
        for r in family:
            ids = []
            for h in r["hash_ids"]:
                if h not in fresh:
                    fresh[h] = next_id
                    next_id += 1
                ids.append(fresh[h])
            out.append(
                {
                    "timestamp": int(round(r["timestamp"] + offset)),
                    "input_length": r["input_length"],
                    "output_length": r.get("output_length", 0),
                    "hash_ids": ids,
                }
            )
    out.sort(key=lambda r: r["timestamp"])
    return out


def read_trace(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: resample_trace.py TRACE SEED > NEW_TRACE")
    requests = read_trace(sys.argv[1])
    if not requests:
        sys.exit("resample_trace: empty trace")
    for r in resample(requests, int(sys.argv[2])):
        print(json.dumps(r))


if __name__ == "__main__":
    main()
