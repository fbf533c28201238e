#!/usr/bin/python3
"""System calls per request of dpgate, HAProxy and nginx, counted by the
kernel (docs/BENCHMARKS.md).

    tests/bench/proxy/syscalls_per_request.py [--connections 64] [--seconds 3] [--rounds 3]
                                              [--streams N [--stream-token-ms 20]]
                                              [--baseline NAME=DPGATE_BINARY ...]

Starts one dpgate-sim and the proxies in front of it as bench_proxy.py does
(DPGATE_BIN_DIR's dpgate, two threads or workers each), loads each proxy on
its own with wrk (bench_proxy.wrk), and counts with perf's system-call tracepoints, attached
to the proxy's processes for the run: recvfrom, recvfrom that failed with
EAGAIN (a read tried before anything was there), sendto, writev and
epoll_wait, each per request wrk completed. A failed read costs a whole
system call and does nothing; nginx and HAProxy wait for epoll instead.
With --streams N, the load is N concurrent SSE streams instead
(bench_proxy.stream_run: 16 tokens each, one event per --stream-token-ms), and
the counts are per SSE event the proxy relayed (the [DONE] one included).
Needs perf and tracepoint access (root, or kernel.perf_event_paranoid <= -1).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "integration"))
import bench_proxy  # noqa: E402
from harness import EXACT_SIM_COUNTS, Gateway, Sim  # noqa: E402

# (label, tracepoint, filter): the first two are both recvfrom's exit, all
# and only those that returned -EAGAIN (-11).
EVENTS = [
    ("recv", "syscalls:sys_exit_recvfrom", None),
    ("recv EAGAIN", "syscalls:sys_exit_recvfrom", "ret == -11"),
    ("sendto", "syscalls:sys_exit_sendto", None),
    ("writev", "syscalls:sys_exit_writev", None),
    ("epoll_wait", "syscalls:sys_enter_epoll_wait", None),
]


def count(pids: list[int], port: int, connections: int, seconds: int, streams: int = 0) -> dict[str, float]:
    """Each event's count per request over one wrk run against `port`, or
    with `streams`, per SSE event over a run of that many streams."""
    argv = ["perf", "stat", "-x,", "--no-big-num"]
    for _, event, condition in EVENTS:
        argv += ["-e", event]
        if condition:
            argv += ["--filter", condition]
    argv += ["-p", ",".join(str(p) for p in pids)]
    perf = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # perf attached before the load starts
    if streams:
        run = bench_proxy.stream_run(port, streams, seconds, pids)
        requests = run["relayed"]
    else:
        requests = bench_proxy.wrk(port, connections, seconds)["requests"]
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate(timeout=30)
    values = [line.split(",")[0] for line in err.strip().splitlines() if "," in line]
    if len(values) != len(EVENTS) or not all(v.isdigit() for v in values):
        raise RuntimeError(f"perf stat did not count every event:\n{err}")
    return {label: int(v) / requests for (label, _, _), v in zip(EVENTS, values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", type=int, default=0, help="concurrent SSE streams instead of wrk (counts per event)")
    ap.add_argument("--stream-token-ms", type=int, default=20, help="the simulator's decode time per token")
    ap.add_argument("--baseline", action="append", default=[], metavar="NAME=DPGATE_BINARY",
                    help="another dpgate binary, measured the same way")
    args = ap.parse_args()
    baselines = [b.split("=", 1) for b in args.baseline]

    sim_args = {"threads": 1, "max_output": 16, "extra_args": EXACT_SIM_COUNTS,
                "decode_us_per_token": args.stream_token_ms * 1000} if args.streams else {}
    with Sim(**sim_args) as sim, contextlib.ExitStack() as stack:
        targets, pids = stack.enter_context(bench_proxy.proxies(sim, 2, None))
        for name, binary in baselines:
            gw = stack.enter_context(Gateway(bench_proxy.bench_config(sim, 2), binary=Path(binary)))
            targets[name], pids[name] = gw.port, [gw.pid]
        names = ["dpgate", *(name for name, _ in baselines), *bench_proxy.PEERS]
        results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for _ in range(args.rounds):
            for name in names:
                if args.streams:
                    bench_proxy.stream_run(targets[name], 20, 1, pids[name])  # warm
                else:
                    bench_proxy.wrk(targets[name], args.connections, 1)  # warm: connections pooled, caches filled
                results[name].append(count(pids[name], targets[name], args.connections, args.seconds, args.streams))

    load = (f"per SSE event, {args.streams} concurrent streams at {args.stream_token_ms} ms/token" if args.streams
            else f"per request, wrk -t2 -c{args.connections}")
    print(f"system calls {load}, {args.rounds} runs of {args.seconds} s per proxy (the median run of each)")
    print(f"  {'':10}" + "".join(f"{label:>14}" for label, _, _ in EVENTS))
    for name, runs in results.items():
        medians = [sorted(run[label] for run in runs)[len(runs) // 2] for label, _, _ in EVENTS]
        print(f"  {name:10}" + "".join(f"{m:14.3f}" for m in medians))
    return 0


if __name__ == "__main__":
    sys.exit(main())
