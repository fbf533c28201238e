#!/usr/bin/python3
"""Instructions per request in dpgate, under callgrind: steadier than any
timing on a shared machine (docs/BENCHMARKS.md, issue 18).

    tests/bench/proxy/callgrind_per_request.py [DPGATE_BINARY] [--seconds 10]

Starts dpgate-sim and the dpgate binary (default build/bin/dpgate, one worker
thread) under valgrind's callgrind, warms up with wrk for 3 s, zeroes the
counters, runs wrk -c4 with tests/bench/proxy/bench_post.lua, dumps, and
prints the instructions (Ir) per request and the dump's path, for
callgrind_annotate --inclusive=yes.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from harness import EXACT_SIM_COUNTS, Gateway, Sim, bin_dir, gateway_config  # noqa: E402

LUA = Path(__file__).resolve().parent / "bench_post.lua"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", nargs="?", type=Path, default=bin_dir() / "dpgate")
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    out_dir = Path(tempfile.mkdtemp(prefix="dpgate-callgrind-"))
    wrapper = out_dir / "dpgate-under-callgrind.sh"
    wrapper.write_text(f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={out_dir}/callgrind.out.%p "
                       f"{args.binary.resolve()} \"$@\"\n")
    wrapper.chmod(0o755)
    with Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")], threads=1, log={"level": "warn", "access": "off"})
        with Gateway(config, binary=wrapper, timeout=120) as gw:
            url = f"http://127.0.0.1:{gw.port}"
            subprocess.run(["wrk", "-t1", "-c4", "-d3s", "-s", str(LUA), url], capture_output=True, check=True)
            subprocess.run(["callgrind_control", "-z", str(gw.pid)], capture_output=True, check=True)
            out = subprocess.run(["wrk", "-t1", "-c4", f"-d{args.seconds}s", "-s", str(LUA), url],
                                 capture_output=True, text=True, check=True).stdout
            subprocess.run(["callgrind_control", "-d", str(gw.pid)], capture_output=True, check=True)
            requests = int(re.search(r"(\d+) requests in", out).group(1))
            time.sleep(1)
    dumps = sorted(glob.glob(f"{out_dir}/callgrind.out.*.1"), key=os.path.getmtime)
    if not dumps or requests == 0:
        print("no callgrind dump or no requests", file=sys.stderr)
        return 1
    total = next(int(line.split()[1]) for line in open(dumps[0]) if line.startswith(("summary:", "totals:")))
    print(f"{args.binary}: {requests} requests, {total} Ir, {total // requests} Ir per request; dump {dumps[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
