#!/usr/bin/env python3
"""Admission time before and after a change, side by side in one run:
runs two builds of dpgate-bench-admission in turn, group by group, for a
number of rounds (the machine's noise falls on both alike), and prints the
median over rounds of each row's "admit us" (itself the best of many
admissions) and their ratio.

    tests/bench/admission/compare_admission.py BEFORE_BIN AFTER_BIN [--rounds 5]
        [--only small,agent,conversation,images]

BEFORE_BIN is the benchmark built from the commit before the change (e.g.
`git worktree add /tmp/before HEAD~1`, then `cmake --build` its
dpgate-bench-admission target)."""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
from collections import defaultdict

ROW = re.compile(r"^(?P<case>.+?)\s{2,}(?P<bytes>\d+)\s+(?P<admit>[\d.]+)\s")


def admit_times(binary: str, group: str) -> dict[str, float]:
    out = subprocess.run([binary, "--only", group], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines()[1:]:
        match = ROW.match(line)
        if match:
            rows[match["case"].strip()] = float(match["admit"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="small,agent,conversation,images")
    args = parser.parse_args()
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"before": [], "after": []})
    order: list[str] = []
    for _ in range(args.rounds):
        for group in args.only.split(","):
            for side, binary in (("before", args.before), ("after", args.after)):
                for case, us in admit_times(binary, group).items():
                    if case not in order:
                        order.append(case)
                    times[case][side].append(us)
    print(f"{'case':44} {'before us':>12} {'after us':>12} {'after/before':>13}   (median of {args.rounds} rounds)")
    for case in order:
        before, after = times[case]["before"], times[case]["after"]
        b = statistics.median(before) if before else None
        a = statistics.median(after) if after else None
        fmt = lambda us: f"{us:12.2f}" if us else f"{'-':>12}"
        ratio = f"{a / b:12.3f}x" if a and b else f"{'-':>13}"
        print(f"{case:44} {fmt(b)} {fmt(a)} {ratio}")


if __name__ == "__main__":
    main()
