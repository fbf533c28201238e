#!/usr/bin/env python3
"""Routing quality on many workloads of the trace's kind, not on one file.

Draws SEEDS traces from TRACE with resample_trace.py (whole families of
requests, fresh block ids, random time offsets), replays each through
dpgate-replay in the four cells of the routing goals (N = 1024, 8192 blocks; X = 1, 8)
for dpgate and the peers, and prints one markdown table: per cell, in how
many traces dpgate's mean TTFT is lower than each peer's, the median
difference and ratio, and the other routing goals over all traces
(hit/bound, p99 against least-loaded's, work_imbalance).

Usage: resampled_table.py BUILD_DIR [--trace T] [--seeds 20] [--first-seed 1] [-- extra dpgate-replay args]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resample_trace import read_trace, resample  # noqa: E402

PEERS = ["cache-aware", "cache-aware-blocks", "least-loaded"]
CELLS = [(1024, 1), (1024, 8), (8192, 1), (8192, 8)]


def replay(binary, trace, n, x, policy, extra):
    out = subprocess.run(
        [binary, "--trace", trace, "--slots", "16", "--cache-blocks", str(n), "--speedup", str(x),
         "--policy", policy, *extra],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    # The trace lives in ../shared beside the repository (never vendored).
    ap.add_argument("--trace", default=str(Path(__file__).resolve().parents[3] / ".." / "shared" / "traces" /
                                          "mooncake_synthetic_trace.jsonl"))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1)
    args = ap.parse_args(argv)
    binary = os.path.join(args.build, "bin", "dpgate-replay")
    source = read_trace(args.trace)

    runs = {cell: [] for cell in CELLS}  # cell -> one {policy: result} per seed
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            path = os.path.join(tmp, f"trace-{seed}.jsonl")
            with open(path, "w") as f:
                for r in resample(source, seed):
                    f.write(json.dumps(r) + "\n")
            for n, x in CELLS:
                runs[(n, x)].append({p: replay(binary, path, n, x, p, extra) for p in ["dpgate", *PEERS]})
            os.remove(path)

    seeds = f"seeds {args.first_seed}-{args.first_seed + args.seeds - 1}"
    print(f"| N | X | dpgate mean lower than ({seeds}) | median dpgate / peer | "
          "hit/bound min | p99 <= least-loaded | work_imbalance median (max) |")
    print("|---|---|---|---|---|---|---|")
    for (n, x), seed_runs in runs.items():
        lower, ratio = [], []
        for peer in PEERS[:2]:
            wins = sum(r["dpgate"]["ttft_mean_ms"] < r[peer]["ttft_mean_ms"] for r in seed_runs)
            lower.append(f"{peer} {wins}/{len(seed_runs)}")
            med = statistics.median(r["dpgate"]["ttft_mean_ms"] / r[peer]["ttft_mean_ms"] for r in seed_runs)
            ratio.append(f"{med:.3f}")
        d = [r["dpgate"] for r in seed_runs]
        hit = min(v["hit_ratio"] / v["bound_hit_ratio"] for v in d)
        p99 = sum(r["dpgate"]["ttft_p99_ms"] <= r["least-loaded"]["ttft_p99_ms"] for r in seed_runs)
        imb = [v["work_imbalance"] for v in d]
        print(f"| {n} | {x} | {', '.join(lower)} | {' / '.join(ratio)} | {hit:.2f} | {p99}/{len(seed_runs)} | "
              f"{statistics.median(imb):.3f} ({max(imb):.3f}) |")


if __name__ == "__main__":
    main()
