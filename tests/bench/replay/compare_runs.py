#!/usr/bin/env python3
"""Is one policy's mean TTFT really lower than another's on the same trace?

Reads two `dpgate-replay --per-request FILE` outputs of the same trace and
cell (same arrivals, row for row) and prints the paired difference of mean
TTFT (A - B) with a 95 % interval from a block bootstrap: the trace is cut
into windows of trace time, and windows are drawn with replacement. A window
(in trace time, whatever the replay's time scale) keeps each collision (a
turn arriving behind another request's prefill) whole, so the interval reflects how much the difference owes to a few such
events. It answers "would B still be ahead on another mix of this trace's own
periods", not "on another workload".

Usage: compare_runs.py A.csv B.csv [--window-s 30] [--resamples 20000] [--seed 1]
Prints one line of text, then one JSON object.
"""
import argparse
import csv
import json
import random
import sys


def read(path):
    with open(path, newline="") as f:
        return [(float(r["trace_ms"]), float(r["arrival_ms"]), float(r["ttft_ms"])) for r in csv.DictReader(f)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--window-s", type=float, default=30.0, help="window length in trace seconds")
    ap.add_argument("--resamples", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.window_s <= 0 or args.resamples < 1:
        sys.exit("compare_runs: --window-s must be > 0 and --resamples >= 1")

    a, b = read(args.a), read(args.b)
    if len(a) != len(b) or not a:
        sys.exit("compare_runs: the two files must hold the same trace's requests (row counts differ or are 0)")
    if any(x[0] != y[0] or abs(x[1] - y[1]) > 1e-6 for x, y in zip(a, b)):
        sys.exit("compare_runs: arrivals differ row for row: not the same trace and time scale")

    # Per window: (sum of differences, request count).
    windows = {}
    for (trace_ms, _, ta), (_, _, tb) in zip(a, b):
        w = int(trace_ms // (args.window_s * 1000))
        s, n = windows.get(w, (0.0, 0))
        windows[w] = (s + ta - tb, n + 1)
    blocks = list(windows.values())
    diffs = sorted((x[2] - y[2] for x, y in zip(a, b)), key=abs, reverse=True)
    total = sum(diffs)
    mean = total / len(diffs)

    rng = random.Random(args.seed)
    means = []
    for _ in range(args.resamples):
        s = n = 0
        for _ in blocks:
            bs, bn = blocks[rng.randrange(len(blocks))]
            s += bs
            n += bn
        means.append(s / n)
    means.sort()
    lo = means[int(0.025 * len(means))]
    hi = means[int(0.975 * len(means)) - 1]
    a_lower = sum(m < 0 for m in means) / len(means)
    top10 = sum(diffs[:10])

    verdict = "A lower" if hi < 0 else ("B lower" if lo > 0 else "not distinguishable")
    print(
        f"mean TTFT A - B = {mean:+.3f} ms, 95% interval [{lo:+.3f}, {hi:+.3f}] "
        f"({len(blocks)} windows of {args.window_s:g} s): {verdict}; "
        f"A lower in {100 * a_lower:.0f}% of resamples; the 10 largest per-request differences sum to "
        f"{top10 / len(diffs):+.3f} ms of the mean"
    )
    print(
        json.dumps(
            {
                "requests": len(diffs),
                "windows": len(blocks),
                "window_s": args.window_s,
                "mean_diff_ms": round(mean, 4),
                "ci95_ms": [round(lo, 4), round(hi, 4)],
                "a_lower_share": round(a_lower, 4),
                "top10_diff_ms": round(top10 / len(diffs), 4),
                "requests_differing_over_1ms": sum(abs(d) > 1 for d in diffs),
                "verdict": verdict,
            }
        )
    )


if __name__ == "__main__":
    main()
