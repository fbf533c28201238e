#!/usr/bin/python3
"""Replicas sharing roles through etcd: how soon a flip reaches every
replica, what clients lose meanwhile, and what the control store costs per
request.

    tests/bench/control/flip_convergence.py [--replicas 4] [--flips 100]
        [--load-flips 20] [--outage-seconds 3] [--load-connections 64] [--load-seconds 25]
        [--rounds 16] [--seconds 3] [--connections 16] [--skip convergence,load,cpu]

One 3-member etcd cluster on loopback (tests/integration/etcd_cluster.py)
and two dpgate-sim backends, "primary" and "standby".

Convergence: --replicas dpgate replicas on one prefix; --flips forced
flips, alternating, each through the next replica in turn. For each, one
thread per replica polls its /admin/status on a kept-alive connection
until the new primary shows; the figure is the time from sending the flip
to the last replica showing it (and, beside it, the flip's own answer).

Load: wrk -t1 against every replica, --load-connections in all, for
--load-seconds; meanwhile --load-flips flips and one etcd outage (every
member SIGKILLed for --outage-seconds, then restarted). Lost = non-2xx
answers + socket errors, as wrk counts them (bench_post.lua, the proxy
benchmarks' request). The goal is 0.

CPU: one dpgate with the control store and one without, on one
simulator, loaded at the same time by a wrk -t1 each for --rounds rounds
(as tests/bench/proxy/concurrent_cpu.py does): on-CPU time per request
(schedstat) of each, and per round control-on over control-off, with the
median's 95 % interval (bench_proxy.verdict). etcd's own CPU is not counted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "proxy"))
sys.path.insert(0, str(HERE.parents[1] / "integration"))
import bench_proxy  # noqa: E402
from concurrent_cpu import on_cpu_ns  # noqa: E402
from etcd_cluster import EtcdCluster, unique_prefix  # noqa: E402
from harness import (ADMIN_TOKEN, EXACT_SIM_COUNTS, Gateway, Sim, gateway_config,  # noqa: E402
                     raise_nofile_limit)

# Health probes with slack, as bench_proxy.bench_config: a probe answered
# late on a saturated machine must not mark a backend down mid-run.
SLACK_HEALTH = {"interval_ms": 1000, "timeout_ms": 10000, "fall": 10, "rise": 1}


def control_section(etcd: EtcdCluster, prefix: str, replica_id: str) -> dict:
    return {"replica_id": replica_id,
            "etcd": {"endpoints": etcd.endpoints, "prefix": prefix, "dial_timeout_ms": 1000,
                     "request_timeout_ms": 2000, "lease_ttl_s": 3}}


def replica_config(primary: Sim, standby: Sim, etcd: EtcdCluster, prefix: str, replica_id: str,
                   threads: int) -> dict:
    return gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")],
                          threads=threads, health=SLACK_HEALTH, log={"level": "warn", "access": "off"},
                          control=control_section(etcd, prefix, replica_id))


class AdminClient:
    """A kept-alive connection to one replica's admin listener."""

    def __init__(self, port: int):
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body=None) -> tuple[int, dict | None]:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else None)
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def status(self) -> dict:
        code, body = self.request("GET", "/admin/status")
        if code != 200:
            raise RuntimeError(f"status {code}: {body}")
        return body

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def primary_of(body: dict) -> str | None:
    names = [b["name"] for b in body["backends"] if b["role"] == "primary"]
    return names[0] if len(names) == 1 else None


def flip_body(expect: str, to: str) -> dict:
    return {"expect_primary": expect, "to": to, "force": True, "by": "flip_convergence"}


def percentile(values: list[float], p: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


# --- convergence -------------------------------------------------------------


def convergence(gws: list[Gateway], flips: int, timeout: float = 10.0) -> dict:
    """Per flip: seconds to the flip's answer and to the last replica showing
    the new primary (inf when one did not within `timeout`)."""
    pollers = [AdminClient(gw.admin_port) for gw in gws]
    flippers = [AdminClient(gw.admin_port) for gw in gws]
    current = primary_of(pollers[0].status())
    other = "standby" if current == "primary" else "primary"
    answered, converged, refused = [], [], 0

    def watch(client: AdminClient, target: str, deadline: float) -> float:
        while time.monotonic() < deadline:
            if primary_of(client.status()) == target:
                return time.monotonic()
        return float("inf")

    with concurrent.futures.ThreadPoolExecutor(len(gws)) as pool:
        for i in range(flips):
            started = time.monotonic()
            deadline = started + timeout
            seen = [pool.submit(watch, client, other, deadline) for client in pollers]
            code, body = flippers[i % len(gws)].request("POST", "/admin/flip", flip_body(current, other))
            answered_at = time.monotonic()
            times = [f.result() for f in seen]
            if code != 200:
                refused += 1
                print(f"flip {i} refused: {code} {body}", file=sys.stderr)
                break
            answered.append(answered_at - started)
            converged.append(max(times) - started)
            current, other = other, current
    for client in pollers + flippers:
        client.close()
    return {"answered": answered, "converged": converged, "refused": refused}


# --- flips and an outage under load ------------------------------------------


def wrk_counts(out: str) -> dict:
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    non_2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    socket = [0, 0, 0, 0]
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        socket = [int(x) for x in m.groups()]
    return {"requests": requests, "non_2xx": non_2xx, "socket": socket}


def load_run(gws: list[Gateway], etcd: EtcdCluster, connections: int, seconds: int, flips: int,
             outage_seconds: float) -> dict:
    per_replica = max(1, connections // len(gws))
    loads = [subprocess.Popen(["wrk", "-t1", f"-c{per_replica}", f"-d{seconds}s", "--timeout", "10s",
                               "-s", str(bench_proxy.LUA), f"http://127.0.0.1:{gw.port}"],
                              stdout=subprocess.PIPE, text=True) for gw in gws]
    clients = [AdminClient(gw.admin_port) for gw in gws]
    events: list[str] = []
    started = time.monotonic()
    try:
        time.sleep(1)
        current = primary_of(clients[0].status())
        flip_codes = []
        for i in range(flips):
            other = "standby" if current == "primary" else "primary"
            code, _ = clients[i % len(gws)].request("POST", "/admin/flip", flip_body(current, other))
            flip_codes.append(code)
            if code == 200:
                current = other
            time.sleep(0.2)
        events.append(f"{flips} flips: answers {sorted(set(flip_codes))}")

        etcd.kill_all()
        killed = time.monotonic()
        time.sleep(outage_seconds / 2)
        other = "standby" if current == "primary" else "primary"
        code, body = clients[0].request("POST", "/admin/flip", flip_body(current, other))
        events.append(f"flip during the outage: {code} {(body or {}).get('error', {}).get('code')}")
        if code == 200:
            current, other = other, current
        time.sleep(max(0.0, outage_seconds - (time.monotonic() - killed)))
        etcd.start_all()
        back = time.monotonic()
        events.append(f"etcd down {back - killed:.1f} s (kill to healthy again), at {killed - started:.1f} s into the load")
        while not all(c.status()["control"]["reachable"] for c in clients):
            if time.monotonic() - back > 30:
                events.append("a replica did not reach etcd again within 30 s")
                break
            time.sleep(0.05)
        events.append(f"every replica reachable {time.monotonic() - back:.2f} s after etcd was back")
        code, _ = clients[-1].request("POST", "/admin/flip", flip_body(current, other))
        events.append(f"flip after the outage: {code}")
    finally:
        outputs = [load.communicate()[0] for load in loads]
        for client in clients:
            client.close()
    counts = [wrk_counts(out) for out in outputs]
    total = {"requests": sum(c["requests"] for c in counts), "non_2xx": sum(c["non_2xx"] for c in counts),
             "socket": [sum(c["socket"][k] for c in counts) for k in range(4)], "events": events,
             "per_replica": per_replica}
    total["lost"] = total["non_2xx"] + sum(total["socket"])
    return total


# --- CPU per request, control on and off at once -----------------------------


def cpu_rounds(etcd: EtcdCluster, rounds: int, seconds: int, connections: int, workers: int) -> dict:
    with Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS) as sim:
        off_config = bench_proxy.bench_config(sim, workers)
        on_config = bench_proxy.bench_config(sim, workers)
        on_config["control"] = control_section(etcd, unique_prefix("bench-cpu"), "cpu-on")
        with Gateway(off_config) as off, Gateway(on_config) as on:
            targets = {"off": off, "on": on}
            per_request: dict[str, list[float]] = {"off": [], "on": []}
            for round_index in range(rounds + 1):  # round 0 warms up
                before = {name: on_cpu_ns([gw.pid]) for name, gw in targets.items()}
                loads = {name: subprocess.Popen(
                    ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
                     "-s", str(bench_proxy.LUA), f"http://127.0.0.1:{gw.port}"], stdout=subprocess.PIPE, text=True)
                    for name, gw in targets.items()}
                outputs = {name: load.communicate()[0] for name, load in loads.items()}
                after = {name: on_cpu_ns([gw.pid]) for name, gw in targets.items()}
                if round_index == 0:
                    continue
                for name, out in outputs.items():
                    counts = wrk_counts(out)
                    if counts["non_2xx"] or any(counts["socket"]):
                        raise RuntimeError(f"control {name}: the load saw failed answers:\n{out}")
                    per_request[name].append((after[name] - before[name]) / counts["requests"] / 1e3)
    return per_request


# --- report ------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--replica-threads", type=int, default=1, help="worker threads of each replica")
    ap.add_argument("--flips", type=int, default=100)
    ap.add_argument("--load-flips", type=int, default=20)
    ap.add_argument("--outage-seconds", type=float, default=3.0)
    ap.add_argument("--load-connections", type=int, default=64, help="in all, spread over the replicas")
    ap.add_argument("--load-seconds", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--connections", type=int, default=16, help="per dpgate in the CPU rounds")
    ap.add_argument("--workers", type=int, default=2, help="dpgate threads in the CPU rounds")
    ap.add_argument("--skip", default="", help="comma-separated: convergence, load, cpu")
    args = ap.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    raise_nofile_limit()

    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="dpgate-bench-etcd-") as tmp, contextlib.ExitStack() as stack:
        etcd = EtcdCluster(Path(tmp) / "etcd")
        stack.callback(etcd.close)
        print(f"etcd: 3 members healthy {etcd.startup_seconds:.2f} s after start", flush=True)
        if not {"convergence", "load"} <= skip:
            primary = stack.enter_context(Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS))
            standby = stack.enter_context(Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS))
            prefix = unique_prefix("bench-flips")
            gws = [stack.enter_context(Gateway(replica_config(primary, standby, etcd, prefix, f"r{i + 1}",
                                                              args.replica_threads)))
                   for i in range(args.replicas)]
            if "convergence" not in skip:
                results["convergence"] = convergence(gws, args.flips)
                print("convergence done", flush=True)
            if "load" not in skip:
                results["load"] = load_run(gws, etcd, args.load_connections, args.load_seconds,
                                           args.load_flips, args.outage_seconds)
                print("load done", flush=True)
        if "cpu" not in skip:
            etcd.ensure_running()
            results["cpu"] = cpu_rounds(etcd, args.rounds, args.seconds, args.connections, args.workers)

    print()
    if "convergence" in results:
        c = results["convergence"]
        print(f"Flip convergence: {args.replicas} replicas ({args.replica_threads} thread each), 3-member etcd, "
              f"{len(c['converged'])} forced flips alternating, each through the next replica")
        print(f"  {'':28s} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for label, values in (("flip answered", c["answered"]), ("every replica shows it", c["converged"])):
            if values:
                print(f"  {label:28s} {percentile(values, 50) * 1e3:8.1f} {percentile(values, 99) * 1e3:8.1f} "
                      f"{max(values) * 1e3:8.1f}")
        if c["refused"]:
            print(f"  a flip was refused; stopped after {len(c['converged'])}")
    if "load" in results:
        lo = results["load"]
        print(f"Requests lost: wrk -t1 -c{lo['per_replica']} on each of {args.replicas} replicas for "
              f"{args.load_seconds} s, with {args.load_flips} flips and a {args.outage_seconds:g} s etcd outage")
        for event in lo["events"]:
            print(f"  {event}")
        print(f"  requests {lo['requests']}  non-2xx {lo['non_2xx']}  socket errors connect/read/write/timeout "
              f"{'/'.join(map(str, lo['socket']))}  lost {lo['lost']}")
    if "cpu" in results:
        per = results["cpu"]
        ratios = [on / off for on, off in zip(per["on"], per["off"])]
        added = [on - off for on, off in zip(per["on"], per["off"])]
        print(f"CPU per request, control on and off at once: {args.rounds} rounds of {args.seconds} s, "
              f"wrk -t1 -c{args.connections} each, dpgate {args.workers} threads; on-CPU us per request")
        for name in ("off", "on"):
            print(f"  control {name:4s} median {statistics.median(per[name]):6.2f}  "
                  f"rounds {[round(v, 1) for v in per[name]]}")
        print(f"  on/off: median {bench_proxy.verdict(ratios, above='costlier', below='cheaper')}; "
              f"added median {statistics.median(added):+.2f} us per request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
