#!/usr/bin/python3
"""Proxy overhead, side by side in one run: wrk against dpgate-sim directly,
through dpgate, and through nginx (keep-alive upstream) on the same simulator.

    tests/bench/proxy/bench_proxy.py [--connections 32,64] [--seconds 10] [--rounds 3]
                                     [--baseline OLD/build/bin/dpgate]

Rounds interleave the three targets so that machine noise hits each alike;
the table reports the median of the rounds and dpgate/nginx ratios.
Needs build/bin/{dpgate,dpgate-sim}, wrk and nginx (scripts/setup installs them).
--baseline adds a fourth target: another dpgate binary (say, one built from
an earlier commit in a git worktree) on the same simulator and config, to
show what a change costs per request against the peer in the same run.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from harness import Gateway, Sim, free_port, gateway_config, wait_for_port  # noqa: E402

HERE = Path(__file__).resolve().parent
LUA = HERE / "bench_post.lua"

NGINX_CONF = """
worker_processes {workers};
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream sim {{ server 127.0.0.1:{sim_port}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        client_max_body_size 256m;
        location / {{
            proxy_pass http://sim;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """pid and its descendants (nginx: the master and its workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU the processes have used, from /proc/PID/stat."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLOCK_TICKS


def wrk(port: int, connections: int, seconds: int, pids: list[int] | None = None) -> dict:
    cpu_before = cpu_seconds(pids) if pids else 0.0
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(LUA),
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failures on port {port}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    # CPU seconds the proxy spent per 1,000 requests: steadier than req/s on
    # a shared machine, since it does not count time the proxy waited.
    cpu_per_1k = (cpu_seconds(pids) - cpu_before) / requests * 1000 if pids else float("nan")

    def pct(p: str) -> float:
        value, unit = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    return {"rps": rps, "p50_ms": pct("50"), "p99_ms": pct("99"), "cpu_per_1k": cpu_per_1k}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", default="32,64")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="dpgate threads and nginx workers")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON too")
    ap.add_argument("--baseline", type=Path, help="another dpgate binary to run as target 'baseline'")
    args = ap.parse_args()
    if not shutil.which("wrk") or not shutil.which("nginx"):
        print("needs wrk and nginx (scripts/setup)", file=sys.stderr)
        return 2

    with Sim(threads=1, max_output=16) as sim:
        config = gateway_config([("primary", sim, "primary")], threads=args.workers, log={"level": "warn", "access": "off"})  # nginx: access_log off
        with Gateway(config) as gw, contextlib.ExitStack() as stack:
            baseline = stack.enter_context(Gateway(config, binary=args.baseline)) if args.baseline else None
            prefix = Path(tempfile.mkdtemp(prefix="dpgate-nginx-"))
            for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
                (prefix / d).mkdir()
            nginx_port = free_port()
            (prefix / "nginx.conf").write_text(NGINX_CONF.format(workers=args.workers, prefix=prefix,
                                                                 sim_port=sim.port, port=nginx_port))
            nginx = subprocess.Popen(["nginx", "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for_port(nginx_port)
                targets = {"direct": sim.port, "dpgate": gw.port, "nginx": nginx_port}
                pids = {"direct": [], "dpgate": [gw.pid], "nginx": process_tree(nginx.pid)}
                if baseline is not None:
                    targets["baseline"] = baseline.port
                    pids["baseline"] = [baseline.pid]
                for name, port in targets.items():  # warm up connections and caches
                    wrk(port, 32, 1)
                results: dict[int, dict[str, list[dict]]] = {}
                for c in (int(x) for x in args.connections.split(",")):
                    results[c] = {name: [] for name in targets}
                    for _ in range(args.rounds):
                        for name, port in targets.items():
                            results[c][name].append(wrk(port, c, args.seconds, pids[name]))
            finally:
                nginx.terminate()
                nginx.wait(10)
                shutil.rmtree(prefix, ignore_errors=True)

    print(f"wrk -t2 -d{args.seconds}s, small non-streaming chat body, median of {args.rounds} interleaved rounds; "
          f"dpgate {args.workers} threads, nginx {args.workers} workers, dpgate-sim 1 thread")
    if args.baseline:
        print(f"baseline: {args.baseline}")
    print(f"{'conns':>5} {'target':<8} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'CPU s/1k req':>13}")
    for c, by_target in results.items():
        med = {name: {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50_ms", "p99_ms", "cpu_per_1k")}
               for name, runs in by_target.items()}
        for name, m in med.items():
            cpu = "" if name == "direct" else f"{m['cpu_per_1k']:>13.3f}"
            print(f"{c:>5} {name:<8} {m['rps']:>10.0f} {m['p50_ms']:>8.2f} {m['p99_ms']:>8.2f} {cpu}")
        # Rounds interleave the targets: each round's ratio compares runs a
        # few seconds apart, so the median of those ratios resists drift.
        ratios = [d["rps"] / n["rps"] for d, n in zip(by_target["dpgate"], by_target["nginx"])]
        print(f"{c:>5} dpgate/nginx requests/s = {med['dpgate']['rps'] / med['nginx']['rps']:.2f}x (medians), "
              f"per round {' '.join(f'{r:.2f}' for r in ratios)}, median of rounds {statistics.median(ratios):.2f}x; "
              f"dpgate/direct = {med['dpgate']['rps'] / med['direct']['rps']:.2f}x")
        if "baseline" in by_target:
            ratios = [d["rps"] / b["rps"] for d, b in zip(by_target["dpgate"], by_target["baseline"])]
            print(f"{c:>5} dpgate/baseline requests/s = {med['dpgate']['rps'] / med['baseline']['rps']:.2f}x (medians), "
                  f"per round {' '.join(f'{r:.2f}' for r in ratios)}, median of rounds {statistics.median(ratios):.2f}x")
        for peer in ("nginx", "baseline"):
            if peer in by_target:
                ratios = [d["cpu_per_1k"] / p["cpu_per_1k"] for d, p in zip(by_target["dpgate"], by_target[peer])]
                print(f"{c:>5} dpgate/{peer} CPU per request = {statistics.median(ratios):.2f}x (median of rounds; "
                      f"per round {' '.join(f'{r:.2f}' for r in ratios)})")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
