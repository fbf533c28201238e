#!/usr/bin/python3
"""Cost of dpgate's metrics on the hot path, side by side in one run: two
dpgate processes on the same dpgate-sim, identical but for
`metrics: {enabled: false}` in one of them, each driven by wrk in turn.

    tests/bench/metrics/bench_metrics.py [--connections 32] [--seconds 5] [--rounds 5]

Two workloads: a small non-streaming chat completion (tests/bench/proxy/
bench_post.lua) and a small streaming one with stream_options.include_usage
(bench_stream.lua, so the SSE usage scan is measured too). Rounds alternate
which gateway goes first (on/off, off/on, ...) so drift and machine noise hit
both alike; the table gives medians, and the cost as 1 - on/off from the
median of the per-round (paired) ratios. The metrics' budget is a cost <= 2 %.

Requests/s on a shared 2-core machine swings far more than 2 % from round to
round, so each run also reads the gateway's own CPU time (utime + stime of
/proc/PID/stat, all threads) and reports CPU microseconds per request: what
the metrics cost the gateway, nearly independent of what else runs.

If this dpgate does not know the switch (config error) or ignores it
(/metrics still answers 200 with it off), the run goes on as an A/A run of
two identical gateways and says so: its "cost" is then the noise floor.
Needs build/bin/{dpgate,dpgate-sim} ($DPGATE_BIN_DIR) and wrk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "integration"))
from harness import ADMIN_TOKEN, Gateway, Sim, gateway_config, http_request  # noqa: E402

WORKLOADS = {"chat": HERE.parent / "proxy" / "bench_post.lua", "stream": HERE / "bench_stream.lua"}


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of every thread of a process so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15: utime, stime


def wrk(port: int, script: Path, connections: int, seconds: int, pid: int | None = None) -> dict:
    cpu_before = cpu_seconds(pid) if pid else 0.0
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script),
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failures on port {port}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    cpu_us = (cpu_seconds(pid) - cpu_before) * 1e6 / requests if pid and requests else float("nan")

    def pct(p: str) -> float:
        value, unit = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    return {"rps": rps, "p50_ms": pct("50"), "p99_ms": pct("99"), "cpu_us_per_req": cpu_us}


def spread(ratios: list[float]) -> str:
    """The middle half of the per-round ratios: a cost smaller than this
    spread is not resolved by the run."""
    if len(ratios) < 4:
        return "n/a"
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return f"{q1:.3f}..{q3:.3f}"


def metrics_status(gw: Gateway) -> int:
    return http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})[0]


def start_off_gateway(sim: Sim, workers: int) -> tuple[Gateway, str | None]:
    """The metrics-off gateway, or an identical metrics-on one plus the reason
    when this dpgate cannot turn metrics off."""
    base = dict(threads=workers, log={"level": "warn"})
    try:
        gw = Gateway(gateway_config([("primary", sim, "primary")], metrics={"enabled": False}, **base))
    except RuntimeError as e:
        reason = str(e).splitlines()
        detail = next((line for line in reason if "metrics" in line), reason[0] if reason else "")
        return Gateway(gateway_config([("primary", sim, "primary")], **base)), \
            f"dpgate refused `metrics: {{enabled: false}}`: {detail.strip()}"
    status = metrics_status(gw)
    if status != 404:
        return gw, f"dpgate accepted `metrics: {{enabled: false}}` but /metrics still answers {status} (not wired)"
    return gw, None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2, help="dpgate threads")
    ap.add_argument("--workloads", default="chat,stream", help=f"comma list of {sorted(WORKLOADS)}")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON too")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        print("needs wrk (scripts/setup)", file=sys.stderr)
        return 2
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        print(f"unknown workloads {unknown}; known: {sorted(WORKLOADS)}", file=sys.stderr)
        return 2

    results: dict[str, dict[str, list[dict]]] = {}
    with Sim(threads=1, max_output=16) as sim:
        with Gateway(gateway_config([("primary", sim, "primary")], threads=args.workers,
                                    log={"level": "warn"})) as gw_on:
            assert metrics_status(gw_on) == 200, "the metrics-on gateway must serve /metrics"
            gw_off, fallback = start_off_gateway(sim, args.workers)
            with gw_off:
                if fallback:
                    print(f"NOTE: {fallback}; measuring two identical metrics-on gateways (A/A: noise floor)")
                targets = {"on": gw_on, "off": gw_off}
                for script in (WORKLOADS[w] for w in workloads):  # warm up connections and caches
                    for gw in targets.values():
                        wrk(gw.port, script, args.connections, 1)
                for name in workloads:
                    results[name] = {"on": [], "off": []}
                    for r in range(args.rounds):
                        order = ("on", "off") if r % 2 == 0 else ("off", "on")
                        for target in order:
                            gw = targets[target]
                            results[name][target].append(wrk(gw.port, WORKLOADS[name], args.connections,
                                                             args.seconds, gw.pid))

    label_off = "off" if not fallback else "on(B)"
    print(f"wrk -t2 -c{args.connections} -d{args.seconds}s, median of {args.rounds} interleaved rounds; "
          f"dpgate {args.workers} threads each, one dpgate-sim (1 thread) behind both")
    keys = ("rps", "p50_ms", "p99_ms", "cpu_us_per_req")
    print(f"{'workload':<8} {'metrics':<8} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'CPU us/req':>11}")
    for name, by_target in results.items():
        for target, runs in by_target.items():
            med = {k: statistics.median(run[k] for run in runs) for k in keys}
            label = target if target == "on" else label_off
            print(f"{name:<8} {label:<8} {med['rps']:>10.0f} {med['p50_ms']:>8.2f} {med['p99_ms']:>8.2f} "
                  f"{med['cpu_us_per_req']:>11.1f}")
        paired = [on["rps"] / off["rps"] for on, off in zip(by_target["on"], by_target["off"])]
        ratio = statistics.median(paired)
        print(f"{name:<8} on/{label_off} requests/s = {ratio:.3f}x (middle half of rounds {spread(paired)}); "
              f"throughput cost = {(1 - ratio) * 100:+.1f} %")
        cpu_paired = [on["cpu_us_per_req"] / off["cpu_us_per_req"]
                      for on, off in zip(by_target["on"], by_target["off"])]
        cpu_ratio = statistics.median(cpu_paired)
        print(f"{name:<8} on/{label_off} CPU per request = {cpu_ratio:.3f}x (middle half of rounds "
              f"{spread(cpu_paired)}); CPU cost = {(cpu_ratio - 1) * 100:+.1f} %")
    if args.json:
        print(json.dumps({"fallback": fallback, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
