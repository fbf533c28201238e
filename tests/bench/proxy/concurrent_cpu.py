#!/usr/bin/python3
"""CPU per request of dpgate, HAProxy and nginx (and other dpgate binaries),
all loaded at the same time: the steadier comparison on a shared machine
(docs/BENCHMARKS.md).

    tests/bench/proxy/concurrent_cpu.py [--rounds 16] [--seconds 3] [--connections 16]
                                        [--baseline NAME=DPGATE_BINARY ...] [--no-peers]
                                        [--access-log] [--close] [--streams N [--stream-token-ms 20]]

bench_proxy.py runs the proxies one after the other, so a neighbour's burst
on the host lands on whichever proxy runs then, and rounds of one run
spread by 20 % and more. Here every proxy gets its own wrk (-t1) for the
same seconds of each round, in front of one dpgate-sim: a burst slows all
of them alike, and the ratio within a round keeps. CPU is the time each
proxy's threads spent on a CPU (schedstat, in ns, not tick-sampled user
and system time) per request wrk completed. Prints the median per proxy
and, against dpgate, the median of the per-round ratios with every round's
and the median's 95 % interval (bench_proxy.median_interval): a peer is
ahead or behind only when the whole interval is.
The proxies compete for the same 2 CPUs, so figures are higher than one
proxy alone; compare ratios, not absolute values, with bench_proxy.py.

wrk's p99 latency is compared the same way, round by round (dpgate's over
each peer's, with the median's interval). All at once, each proxy gets
about the same share of the CPUs, so a proxy that does more with its share
also answers sooner.

With --close every request comes on a connection of its own (wrk sends
"Connection: close"): what accepting and closing a connection costs, as for
clients that do not keep connections alive (curl in a loop).

With --streams N the load on each proxy is N concurrent SSE streams
(bench_proxy.stream_run, each proxy's from its own client process) instead
of wrk, from a simulator that decodes a token every --stream-token-ms, and
the figure is CPU per SSE event relayed (every event of every stream
completed, the [DONE] one included).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "integration"))
import bench_proxy  # noqa: E402
from harness import EXACT_SIM_COUNTS, Gateway, Sim  # noqa: E402


def on_cpu_ns(pids: list[int]) -> int:
    """Nanoseconds the processes' threads have run, from /proc/PID/task/TID/schedstat."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError):
                pass  # a thread that ended meanwhile
    return total


def user_system_ticks(pids: list[int]) -> tuple[int, int]:
    """Clock ticks the processes spent in user and in system mode (/proc/PID/stat
    fields 14 and 15, all threads): coarser than schedstat, but split."""
    user = system = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        user += int(fields[11])
        system += int(fields[12])
    return user, system


def stream_load(port: int, streams: int, seconds: int) -> subprocess.Popen:
    """A client process that runs `streams` streams against `port` for `seconds`
    and prints {"events": N}: the SSE events of the streams it completed."""
    return subprocess.Popen([sys.executable, __file__, "--stream-client", str(port), str(streams), str(seconds)],
                            stdout=subprocess.PIPE, text=True)


def stream_client(port: int, streams: int, seconds: int) -> None:
    run = bench_proxy.stream_run(port, streams, seconds, [])
    print(json.dumps({"events": run["relayed"]}))


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--stream-client":
        stream_client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=16, help="per proxy")
    ap.add_argument("--baseline", action="append", default=[], metavar="NAME=BINARY",
                    help="another dpgate binary on the same simulator and config")
    ap.add_argument("--no-peers", action="store_true", help="dpgate binaries only")
    ap.add_argument("--access-log", action="store_true",
                    help="every proxy logs each request to a file (dpgate's default config logs them)")
    ap.add_argument("--close", action="store_true", help="a connection per request (Connection: close)")
    ap.add_argument("--streams", type=int, default=0, help="concurrent SSE streams per proxy instead of wrk")
    ap.add_argument("--stream-token-ms", type=int, default=20, help="the simulator's decode time per token")
    args = ap.parse_args()
    unit = "SSE event" if args.streams else "request"

    per_request: dict[str, list[float]] = {}
    p99: dict[str, list[float]] = {}  # ms, per round
    ticks: dict[str, list[int]] = {}  # user, system, requests over all rounds
    sim_args = {"decode_us_per_token": args.stream_token_ms * 1000} if args.streams else {}
    with Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS, **sim_args) as sim, \
            contextlib.ExitStack() as stack:
        logs = None
        if args.access_log:
            logs = Path(tempfile.mkdtemp(prefix="dpgate-access-logs-"))
            stack.callback(shutil.rmtree, logs, ignore_errors=True)
        targets, pids = stack.enter_context(bench_proxy.proxies(sim, 2, None, logs))
        ports = {"dpgate": targets["dpgate"]}
        owners = {"dpgate": pids["dpgate"]}
        config = bench_proxy.bench_config(sim, 2, logs / "dpgate-access.log" if logs else None)
        for spec in args.baseline:
            name, _, binary = spec.partition("=")
            gw = stack.enter_context(Gateway(config, binary=Path(binary)))
            ports[name], owners[name] = gw.port, [gw.pid]
        if not args.no_peers:
            for peer in bench_proxy.PEERS:
                ports[peer], owners[peer] = targets[peer], pids[peer]
        for round_index in range(args.rounds + 1):  # round 0 warms up
            before = {name: on_cpu_ns(owners[name]) for name in ports}
            ticks_before = {name: user_system_ticks(owners[name]) for name in ports}
            if args.streams:
                loads = {name: stream_load(port, args.streams, args.seconds) for name, port in ports.items()}
            else:
                loads = {name: subprocess.Popen(
                    ["wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds}s", "--timeout", "10s", "--latency",
                     *(["-H", "Connection: close"] if args.close else []),
                     "-s", str(bench_proxy.LUA), f"http://127.0.0.1:{port}"], stdout=subprocess.PIPE, text=True)
                    for name, port in ports.items()}
            outputs = {name: load.communicate()[0] for name, load in loads.items()}
            after = {name: on_cpu_ns(owners[name]) for name in ports}
            ticks_after = {name: user_system_ticks(owners[name]) for name in ports}
            if round_index == 0:
                continue
            for name, out in outputs.items():
                if loads[name].returncode != 0 or "Non-2xx" in out:
                    print(f"{name}: the load saw failed answers:\n{out}", file=sys.stderr)
                    return 1
                done = (json.loads(out)["events"] if args.streams
                        else int(re.search(r"(\d+) requests in", out).group(1)))
                per_request.setdefault(name, []).append((after[name] - before[name]) / done / 1e3)
                if not args.streams:
                    p99.setdefault(name, []).append(bench_proxy.percentile_ms(out, 99))
                total = ticks.setdefault(name, [0, 0, 0])
                total[0] += ticks_after[name][0] - ticks_before[name][0]
                total[1] += ticks_after[name][1] - ticks_before[name][1]
                total[2] += done

    load = (f"{args.streams} streams at {args.stream_token_ms} ms/token" if args.streams
            else f"wrk -t1 -c{args.connections}" + (", a connection per request" if args.close else ""))
    print(f"{args.rounds} rounds of {args.seconds} s, {load} per proxy, all at once; on-CPU us per {unit}")
    for name, values in per_request.items():
        print(f"  {name:10s} median {statistics.median(values):6.2f}  rounds {[round(v, 1) for v in values]}")
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    print(f"user and system time per {unit}, all rounds together (us, from clock ticks)")
    for name, (user, system, done) in ticks.items():
        print(f"  {name:10s} user {user * tick_us / done:6.2f}  system {system * tick_us / done:6.2f}")
    for name, values in per_request.items():
        if name == "dpgate":
            continue
        ratios = [other / mine for other, mine in zip(values, per_request["dpgate"])]
        print(f"  {name}/dpgate CPU per {unit}: median {bench_proxy.verdict(ratios)} "
              f"(below 1: {name} uses less); rounds {[round(r, 3) for r in ratios]}")
    if p99:
        print("p99 latency (ms, median of rounds) and dpgate's over each other's, per round")
        for name, values in p99.items():
            print(f"  {name:10s} p99 {statistics.median(values):6.2f}")
        for name, values in p99.items():
            if name != "dpgate":
                ratios = [mine / other for mine, other in zip(p99["dpgate"], values)]
                print(f"  dpgate/{name} p99: {bench_proxy.p99_verdict(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
