#!/usr/bin/python3
"""Instructions per request in dpgate, under callgrind: steadier than any
timing on a shared machine (docs/BENCHMARKS.md).

    tests/bench/proxy/callgrind_per_request.py [DPGATE_BINARY] [--seconds 10] [--connections 4] [--cache-sim [--l2-kib 512]]
    tests/bench/proxy/callgrind_per_request.py --peer haproxy|nginx [--seconds 10] [--connections 4] [--cache-sim [--l2-kib 512]]
    tests/bench/proxy/callgrind_per_request.py [DPGATE_BINARY] --streams 50 [--seconds 8] [--top 12]

Starts dpgate-sim and the dpgate binary (default build/bin/dpgate, one worker
thread) under valgrind's callgrind, warms up with wrk for 3 s, zeroes the
counters, runs wrk -c4 (--connections) with tests/bench/proxy/bench_post.lua, dumps, and
prints the instructions (Ir) per request and the dump's path, for
callgrind_annotate --inclusive=yes. --peer measures HAProxy (nbthread 1) or
nginx (1 worker, no master) the same way, configured as in bench_proxy.py.

--streams N measures a stream's events instead: N concurrent SSE streams
(bench_proxy.stream_run, 16 tokens each at 20 ms per token) for --seconds,
and prints instructions per SSE event relayed (every event of every stream
completed, the [DONE] one included, so each also carries its share of the
stream's connection and request) and the --top functions by inclusive
instructions per event (docs/BENCHMARKS.md).

--footprint also records instruction addresses (--dump-instr=yes) and prints
the code the measured run executed: distinct 64-byte lines and 4 KiB pages,
per object file. A request that runs on cold caches (after a context
switch, or another process on the core) pays per line and page it touches,
not per instruction, so this is the figure to shrink when instructions do
not explain the time (docs/BENCHMARKS.md).

--locked also records instruction addresses and prints the locked (atomic
read-modify-write) instructions executed per request, with the functions
that ran the most of them. callgrind counts such an instruction as one, but
each waits for the core's pending stores to drain: on these machines 32
more per request cost 2.3 % of a small proxied request's CPU
(docs/BENCHMARKS.md).

--cache-sim adds callgrind's cache simulation (this machine's first-level and
last-level caches) and prints data and instruction misses per request. With
many connections, every request's state waits while the others run; what it
touches again when its answer arrives is what misses (docs/BENCHMARKS.md).
callgrind simulates two levels; --l2-kib makes the second one a core's
second-level cache (8-way; 512 KiB on the EPYC parts these machines run
on) instead of the shared last level, whose misses are then the
second-level misses of the real machine (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from harness import EXACT_SIM_COUNTS, Gateway, Sim, bin_dir, free_port, gateway_config, wait_for_port  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_proxy  # noqa: E402

LUA = Path(__file__).resolve().parent / "bench_post.lua"


def measured(pid: int, warm, load) -> int:
    """Runs `warm()`, zeroes the counters of the callgrind in `pid`, runs
    `load()`, dumps; returns what `load` returned (the measured run's
    requests or SSE events)."""
    warm()
    subprocess.run(["callgrind_control", "-z", str(pid)], capture_output=True, check=True)
    done = load()
    subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True, check=True)
    time.sleep(1)
    return done


def under_load(pid: int, url: str, seconds: int, connections: int) -> int:
    """wrk over `connections` (3 s to warm up): the requests of the measured run."""
    load = ["wrk", "-t1", f"-c{connections}", "-s", str(LUA), url]

    def run() -> int:
        out = subprocess.run(load + [f"-d{seconds}s"], capture_output=True, text=True, check=True).stdout
        return int(re.search(r"(\d+) requests in", out).group(1))

    return measured(pid, lambda: subprocess.run(load + ["-d3s"], capture_output=True, check=True), run)


def under_streams(pid: int, port: int, seconds: int, streams: int) -> int:
    """`streams` concurrent SSE streams: the SSE events of the measured run."""
    return measured(pid, lambda: bench_proxy.stream_run(port, min(streams, 20), 3, []),
                    lambda: bench_proxy.stream_run(port, streams, seconds, [])["relayed"])


def top_functions(dump: str, per: int, top: int) -> list[tuple[float, str]]:
    """The `top` functions of the program's own code by inclusive
    instructions, per `per` (callgrind_annotate --inclusive=yes)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+\S*?:(dpgate::.*?)( \[.*)?$", line)
        if m:
            rows.append((int(m.group(1).replace(",", "")) / per, m.group(2)))
    return rows[:top]


def event_totals(dump: str) -> dict[str, int]:
    """{event: total} of a callgrind dump, from its events: and summary:
    lines (read in one pass; the summary may leave trailing zeros off)."""
    events: list[str] = []
    with open(dump) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                return dict.fromkeys(events, 0) | dict(zip(events, map(int, line.split()[1:])))
    raise ValueError(f"{dump}: no summary line")


def executed_instructions(dump: str) -> dict[tuple[str, int], tuple[str, int]]:
    """{(object file, address): (function, times executed)} of a callgrind
    dump written with --dump-instr=yes."""
    objects: dict[str, str] = {}
    functions: dict[str, str] = {}
    executed: dict[tuple[str, int], tuple[str, int]] = {}
    obj = function = "?"
    address = 0
    after_call = False
    for raw in open(dump, errors="replace"):
        if raw.startswith(("ob=", "cob=", "fn=", "cfn=")):
            key, _, rest = raw.rstrip("\n").partition("=")
            ref, _, name = rest.partition(" ")
            table = objects if key.endswith("ob") else functions
            if name:
                table[ref] = name
            if key == "ob":
                obj = objects.get(ref, ref)
            elif key == "fn":
                function = functions.get(ref, ref)
            continue
        if raw.startswith("calls="):
            after_call = True  # the next cost line is the call's inclusive cost
            continue
        c = raw[0]
        if c == "0" and raw.startswith("0x"):
            address = int(raw.split()[0], 16)
        elif c in "+-":
            address += int(raw.split()[0])
        elif c != "*":
            continue
        if after_call:
            after_call = False
            continue
        fields = raw.split()
        _, count = executed.get((obj, address), (function, 0))
        executed[(obj, address)] = (function, count + (int(fields[2]) if len(fields) > 2 else 0))
    return executed


def code_footprint(executed: dict[tuple[str, int], tuple[str, int]]) -> dict[str, tuple[int, int]]:
    """{object file: (distinct 64-byte lines, distinct 4 KiB pages)} of the
    executed instructions."""
    lines: dict[str, set[int]] = {}
    for obj, address in executed:
        lines.setdefault(obj, set()).add(address >> 6)
    return {obj: (len(ls), len({line >> 6 for line in ls})) for obj, ls in lines.items()}


def locked_instructions(executed: dict[tuple[str, int], tuple[str, int]]) -> tuple[int, collections.Counter]:
    """(locked instructions executed, {function: how many}): instructions
    with a lock prefix, and xchg with memory (locked without one), found in
    each object's disassembly."""
    locked: set[tuple[str, int]] = set()
    for path in {obj for obj, _ in executed if obj.startswith("/")}:
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            m = re.match(r"\s+([0-9a-f]+):\s+(\S+)(.*)", line)
            if m and (m.group(2) == "lock" or (m.group(2).startswith("xchg") and "(" in m.group(3))):
                locked.add((path, int(m.group(1), 16)))
    by_function: collections.Counter = collections.Counter()
    for site, (function, count) in executed.items():
        if site in locked:
            by_function[function] += count
    return sum(by_function.values()), by_function


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", nargs="?", type=Path, default=bin_dir() / "dpgate")
    ap.add_argument("--peer", choices=["haproxy", "nginx"])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--footprint", action="store_true", help="also print the code lines and pages executed")
    ap.add_argument("--locked", action="store_true",
                    help="also print the locked (atomic read-modify-write) instructions executed per request")
    ap.add_argument("--connections", type=int, default=4, help="wrk connections (default 4)")
    ap.add_argument("--cache-sim", action="store_true",
                    help="also simulate the caches (callgrind's default: this machine's L1 and last level) and "
                         "print data and instruction misses per request")
    ap.add_argument("--branch-sim", action="store_true",
                    help="also simulate branch prediction and print mispredicted conditional and indirect "
                         "branches per request")
    ap.add_argument("--streams", type=int, default=0, help="N concurrent SSE streams instead of wrk: per SSE event")
    ap.add_argument("--top", type=int, default=12, help="with --streams: how many functions to list")
    ap.add_argument("--l2-kib", type=int,
                    help="with --cache-sim: simulate a second level of this many KiB (8-way, 64 B lines) as the "
                         "last level, so that DLmr/DLmw count its misses")
    args = ap.parse_args()
    if args.peer and args.streams:
        print("--streams measures dpgate only", file=sys.stderr)
        return 2
    out_dir = Path(tempfile.mkdtemp(prefix="dpgate-callgrind-"))
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.out.%p"]
    if args.footprint or args.locked:
        valgrind.append("--dump-instr=yes")
    if args.cache_sim:
        valgrind.append("--cache-sim=yes")
        if args.l2_kib:
            valgrind.append(f"--LL={args.l2_kib * 1024},8,64")
    if args.branch_sim:
        valgrind.append("--branch-sim=yes")
    sim_args = {"decode_us_per_token": 20_000} if args.streams else {}
    with Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS, **sim_args) as sim:
        if args.peer:
            name = args.peer
            port = free_port()
            argv = bench_proxy.peer_argv(args.peer, out_dir, sim.port, port, workers=1, nginx_master=False)
            peer = subprocess.Popen(valgrind + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for_port(port, timeout=60)
                requests = under_load(peer.pid, f"http://127.0.0.1:{port}", args.seconds, args.connections)
            finally:
                peer.terminate()
                peer.wait()
        else:
            name = str(args.binary)
            wrapper = out_dir / "dpgate-under-callgrind.sh"
            wrapper.write_text(f"#!/bin/sh\nexec {' '.join(valgrind)} {args.binary.resolve()} \"$@\"\n")
            wrapper.chmod(0o755)
            # huge_pages: false, so that the text stays the file's and callgrind names its functions.
            config = gateway_config([("primary", sim, "primary")], threads=1, log={"level": "warn", "access": "off"},
                                    huge_pages=False)
            with Gateway(config, binary=wrapper, timeout=120) as gw:
                if args.streams:
                    requests = under_streams(gw.pid, gw.port, args.seconds, args.streams)
                else:
                    requests = under_load(gw.pid, f"http://127.0.0.1:{gw.port}", args.seconds, args.connections)
    dumps = sorted(glob.glob(f"{out_dir}/callgrind.out.*.1"), key=os.path.getmtime)
    if not dumps or requests == 0:
        print("no callgrind dump or no requests", file=sys.stderr)
        return 1
    counts = event_totals(dumps[0])
    total = counts["Ir"]
    unit = "SSE event" if args.streams else "request"
    print(f"{name}: {requests} {unit}s, {total} Ir, {total // requests} Ir per {unit}; dump {dumps[0]}")
    if args.streams:
        for per_event, function in top_functions(dumps[0], requests, args.top):
            print(f"  {per_event:9.0f}  {function[:140]}")
    if args.cache_sim:
        # D1mr/D1mw: first-level data misses on reads/writes; DLmr/DLmw: last-level ones.
        print("  per request: " + ", ".join(f"{event} {counts[event] / requests:.1f}"
                                           for event in ("D1mr", "D1mw", "DLmr", "DLmw", "I1mr", "ILmr")))
    if args.branch_sim:
        # Bc/Bcm: conditional branches and their mispredictions; Bi/Bim: indirect ones.
        print("  per request: " + ", ".join(f"{event} {counts[event] / requests:.1f}"
                                           for event in ("Bc", "Bcm", "Bi", "Bim")))
    executed = executed_instructions(dumps[0]) if args.locked or args.footprint else {}
    if args.locked:
        total_locked, by_function = locked_instructions(executed)
        print(f"  locked instructions per request: {total_locked / requests:.1f}")
        for function, n in by_function.most_common(12):
            if n / requests >= 0.5:
                print(f"    {n / requests:6.1f}  {function[:140]}")
    if args.footprint:
        footprint = code_footprint(executed)
        print(f"  code executed: {sum(l for l, _ in footprint.values())} lines of 64 B, "
              f"{sum(p for _, p in footprint.values())} pages of 4 KiB")
        for obj, (ls, pages) in sorted(footprint.items(), key=lambda kv: -kv[1][0]):
            if ls >= 20:
                print(f"    {ls:6d} lines {pages:4d} pages  {obj}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
