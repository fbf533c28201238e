#!/usr/bin/python3
"""Proxy cost, side by side in one run: wrk against dpgate-sim directly,
through dpgate, through HAProxy and through nginx (keep-alive upstream), all
on the same simulator; then 500 concurrent SSE streams through each.

    tests/bench/proxy/bench_proxy.py [--connections 32,256] [--seconds 10] [--rounds 3]
                                     [--streams 500] [--stream-seconds 8]
                                     [--baseline OLD/build/bin/dpgate]

Rounds interleave the targets so that machine noise hits each alike, each
round starting one target further along; the tables report the median of
the rounds, and ratios computed per round (each compares runs a few seconds
apart) then their median, with the median's 95 % interval for requests per
CPU second and for p99 (median_interval: from 6 rounds; with 8 it spans the
smallest to the largest round).

Requests: wrk -t2, a small non-streaming chat. Per target: requests/s,
p50/p99 and the proxy's CPU seconds per 1,000 requests, read from
/proc/PID/stat (user + system, every thread and child) before and after the
run. "req/s per CPU s" compares what each proxy does with one CPU second:
dpgate/peer above 1.0 means dpgate serves more requests per CPU second.

Streams: N clients each keep one stream open at all times (16 tokens from a
simulator that decodes one token per --stream-token-ms, default 100: slow
enough that the Python client keeps up with 500 streams on a shared machine;
at 20 ms it fell behind and its own lag swamped the proxies'). Every SSE event is timestamped
on arrival relative to when its request was sent; for each event index the
median (and p99) over streams is taken, and a proxy's added latency per
event is the mean over event indexes of (proxy - direct). The client is
Python asyncio, slower than the proxies, so it is measured identically for
every target and only the differences are reported.

Needs build/bin/{dpgate,dpgate-sim}, wrk, haproxy and nginx (scripts/setup
installs them). --baseline adds another dpgate binary (say, one built from
an earlier commit in a git worktree) on the same simulator and config.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from harness import (CLIENT_KEY, EXACT_SIM_COUNTS, MODEL, Gateway, Sim, free_port,  # noqa: E402
                     gateway_config, raise_nofile_limit, wait_for_port)

HERE = Path(__file__).resolve().parent
LUA = HERE / "bench_post.lua"

NGINX_CONF = """
worker_processes {workers};
worker_rlimit_nofile 65536;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 16384; }}
http {{
    {access_log};
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream sim {{ server 127.0.0.1:{sim_port}; keepalive 1024; }}
    server {{
        listen 127.0.0.1:{port} reuseport;
        client_max_body_size 256m;
        location / {{
            proxy_pass http://sim;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 60s;
        }}
    }}
}}
"""

# The HAProxy peer: the conversation's header chooses the server on a
# consistent hash ring (the closest peer to dpgate's affinity), idle server
# connections shared by any client (http-reuse always), as many threads as
# dpgate has workers. No logging, as dpgate and nginx run without access logs
# (with --access-log, each logs every request: HAProxy its httplog line to
# stdout, which goes to a file, nginx its default combined line).
HAPROXY_CONF = """
global
    nbthread {workers}
    maxconn 8000{log_target}
defaults
    mode http{log_format}
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
frontend dpgate_bench
    bind 127.0.0.1:{port}
    default_backend sim
backend sim
    balance hdr(X-Session-ID)
    hash-type consistent
    http-reuse always
    server sim 127.0.0.1:{sim_port} maxconn 4000
"""

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PEERS = ("haproxy", "nginx")


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
    """User + system CPU the processes (all their threads) have used, from /proc/PID/stat."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLOCK_TICKS


def wrk(port: int, connections: int, seconds: int, pids: list[int] | None = None, name: str = "") -> dict:
    cpu_before = cpu_seconds(pids) if pids else 0.0
    # --timeout 10s: wrk's 2 s default counts a slow answer on a saturated
    # machine as a socket error, which would stop the run.
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "--latency", "-s", str(LUA),
                          f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failures through {name or port}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    # CPU seconds the proxy spent per 1,000 requests: steadier than req/s on
    # a shared machine, since it does not count time the proxy waited.
    cpu_per_1k = (cpu_seconds(pids) - cpu_before) / requests * 1000 if pids else float("nan")
    return {"rps": rps, "p50_ms": percentile_ms(out, 50), "p99_ms": percentile_ms(out, 99), "cpu_per_1k": cpu_per_1k,
            "requests": requests}


def percentile_ms(wrk_output: str, p: int) -> float:
    """The p-th percentile latency in ms from the distribution wrk --latency prints."""
    value, unit = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", wrk_output, re.M).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def bench_config(sim: Sim, workers: int, access_log: Path | None = None) -> dict:
    """The dpgate config every proxy benchmark runs: one backend, no access
    log (or one written to the file `access_log`), and health probes that
    give a saturated machine slack (a probe answered late would mark the
    only backend down and turn the run into 503s)."""
    return gateway_config([("primary", sim, "primary")], threads=workers,
                          log={"level": "warn", "access": str(access_log) if access_log else "off"},
                          health={"interval_ms": 1000, "timeout_ms": 10000, "fall": 10, "rise": 1})


def peer_argv(peer: str, prefix: Path, sim_port: int, port: int, workers: int, nginx_master: bool = True,
              access_log: bool = False) -> list[str]:
    """Writes `peer`'s config (NGINX_CONF or HAPROXY_CONF) into `prefix`, with
    the directories nginx wants there, and returns its command line. With
    `access_log`, nginx logs to prefix/nginx-access.log and HAProxy to its
    stdout (the caller sends that to a file)."""
    if peer == "nginx":
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (prefix / d).mkdir(exist_ok=True)
        conf = prefix / "nginx.conf"
        log = f"access_log {prefix}/nginx-access.log" if access_log else "access_log off"
        conf.write_text(("" if nginx_master else "master_process off;\n") +
                        NGINX_CONF.format(workers=workers, prefix=prefix, sim_port=sim_port, port=port,
                                          access_log=log))
        return ["nginx", "-p", str(prefix), "-c", str(conf)]
    conf = prefix / "haproxy.cfg"
    conf.write_text(HAPROXY_CONF.format(workers=workers, sim_port=sim_port, port=port,
                                        log_target="\n    log stdout format raw local0 info" if access_log else "",
                                        log_format="\n    log global\n    option httplog" if access_log else ""))
    return ["haproxy", "-db", "-f", str(conf)]


@contextlib.contextmanager
def proxies(sim: Sim, workers: int, baseline: Path | None, access_logs: Path | None = None):
    """dpgate, HAProxy and nginx (and the baseline dpgate) in front of `sim`:
    yields ({target: port}, {target: pids whose CPU is the proxy's}). With
    `access_logs` (a directory), every proxy logs each request to a file there."""
    # The peers log nothing and probe nothing; dpgate's config (bench_config) likewise.
    config = bench_config(sim, workers, access_logs / "dpgate-access.log" if access_logs else None)
    with Gateway(config) as gw, contextlib.ExitStack() as stack:
        base = stack.enter_context(Gateway(config, binary=baseline)) if baseline else None
        prefix = Path(tempfile.mkdtemp(prefix="dpgate-peers-"))
        stack.callback(shutil.rmtree, prefix, ignore_errors=True)
        nginx_port, haproxy_port = free_port(), free_port()
        peers = []
        logged = access_logs is not None
        for argv in (peer_argv("nginx", prefix, sim.port, nginx_port, workers, access_log=logged),
                     peer_argv("haproxy", prefix, sim.port, haproxy_port, workers, access_log=logged)):
            out = subprocess.DEVNULL
            if logged and argv[0] == "haproxy":
                out = stack.enter_context(open(access_logs / "haproxy-access.log", "wb"))
            proc = subprocess.Popen(argv, stdout=out,
                                    stderr=open(prefix / f"{argv[0]}.stderr", "wb"))
            peers.append(proc)
            stack.callback(proc.wait, 10)
            stack.callback(proc.terminate)
        wait_for_port(nginx_port)
        wait_for_port(haproxy_port)
        targets = {"direct": sim.port, "dpgate": gw.port, "haproxy": haproxy_port, "nginx": nginx_port}
        pids = {"direct": [], "dpgate": [gw.pid], "haproxy": [peers[1].pid], "nginx": process_tree(peers[0].pid)}
        if base is not None:
            targets["baseline"] = base.port
            pids["baseline"] = [base.pid]
        yield targets, pids


# --- streams -----------------------------------------------------------------

STREAM_BODY = json.dumps({"model": MODEL, "max_tokens": 16, "stream": True,
                          "stream_options": {"include_usage": True},
                          "messages": [{"role": "user", "content": "Stream a few words to the benchmark."}]})


class _Stream(asyncio.Protocol):
    """One streamed answer on its own connection: records, per SSE event,
    the seconds since the request was written. Chunked framing is not
    parsed; the event marker "data:" is counted across reads."""

    def __init__(self, done: asyncio.Future):
        self.done = done
        self.sent = 0.0
        self.offsets: list[float] = []
        self.tail = b""
        self.head = True

    def connection_made(self, transport):
        self.transport = transport
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                   f"Authorization: Bearer {CLIENT_KEY}\r\nContent-Length: {len(STREAM_BODY)}\r\n"
                   f"Connection: close\r\n\r\n{STREAM_BODY}").encode()
        self.sent = time.perf_counter()
        transport.write(request)

    def data_received(self, data: bytes):
        now = time.perf_counter() - self.sent
        if self.head:
            if not data.startswith(b"HTTP/1.1 200"):
                self._finish(f"status {data[:40]!r}")
                return
            self.head = False
        text = self.tail + data
        self.offsets += [now] * text.count(b"data:")
        if b"[DONE]" in text:
            self._finish(None)
        self.tail = text[-5:] if not text.endswith(b"data:") else b""

    def connection_lost(self, exc):
        self._finish("closed before [DONE]")

    def _finish(self, error):
        if not self.done.done():
            self.done.set_result(error)
        self.transport.close()


async def _stream_load(port: int, streams: int, seconds: float) -> tuple[list[list[float]], int]:
    """`streams` clients, each opening the next stream when one ends, for `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    finished: list[list[float]] = []
    errors = 0

    async def client(i: int):
        nonlocal errors
        await asyncio.sleep(i * 0.002)  # ramp up, not 500 SYNs at once
        while loop.time() < deadline:
            done = loop.create_future()
            stream = _Stream(done)
            try:
                await loop.create_connection(lambda: stream, "127.0.0.1", port)
                error = await asyncio.wait_for(done, 30)
            except (OSError, asyncio.TimeoutError) as e:
                error = repr(e)
            if error is None:
                finished.append(stream.offsets)
            else:
                errors += 1

    await asyncio.gather(*(client(i) for i in range(streams)))
    return finished, errors


def stream_run(port: int, streams: int, seconds: float, pids: list[int]) -> dict:
    cpu_before = cpu_seconds(pids) if pids else 0.0
    finished, errors = asyncio.run(_stream_load(port, streams, seconds))
    if errors or not finished:
        raise RuntimeError(f"{errors} of {errors + len(finished)} streams failed on port {port}")
    cpu_per_1k = (cpu_seconds(pids) - cpu_before) / len(finished) * 1000 if pids else float("nan")
    events = min(len(f) for f in finished)
    by_event = [sorted(f[k] for f in finished) for k in range(events)]
    # relayed: every SSE event of every stream completed ("data: [DONE]" is one of them).
    return {"streams": len(finished), "events": events, "relayed": sum(len(f) for f in finished),
            "cpu_per_1k": cpu_per_1k,
            "p50_ms": [e[len(e) // 2] * 1000 for e in by_event],
            "p99_ms": [e[min(len(e) - 1, len(e) * 99 // 100)] * 1000 for e in by_event]}


def added_ms(run: dict, direct: dict, key: str) -> float:
    """Mean over event indexes of the run's latency minus the direct one's."""
    n = min(run["events"], direct["events"])
    return statistics.fmean(run[key][k] - direct[key][k] for k in range(n))


# --- report ------------------------------------------------------------------


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """The distribution-free interval for the median of what `values` sample
    (the sign test's): the k-th smallest and the k-th largest value, with k
    the largest rank whose two tails hold at most 1 - confidence of a
    Binomial(n, 1/2). None when there are too few values (under 6 at 95 %).
    With 30 rounds it is the 10th to the 21st; with 8, the smallest to the
    largest."""
    xs = sorted(values)
    n = len(xs)
    k = 0
    below = 0.0  # P(B <= j) for B ~ Binomial(n, 1/2)
    for j in range(n // 2):
        below += math.comb(n, j) / 2 ** n
        if 2 * below > 1 - confidence:
            break
        k = j + 1
    return (xs[k - 1], xs[n - k]) if k else None


def verdict(ratios: list[float], above: str = "ahead", below: str = "behind", digits: int = 3) -> str:
    """The median ratio with its 95 % interval, and what the interval says:
    `above` (all of it above 1), `below` (all of it below 1) or level. For
    CPU ratios (higher is dpgate's better) ahead/behind; for dpgate's p99
    over a peer's, higher/lower with two digits."""
    median = statistics.median(ratios)
    interval = median_interval(ratios)
    if interval is None:
        return f"{median:.{digits}f}x"
    low, high = interval
    word = above if low > 1 else below if high < 1 else "level"
    return f"{median:.{digits}f}x [95 % interval {low:.{digits}f}-{high:.{digits}f}: {word}]"


def p99_verdict(ratios: list[float]) -> str:
    """verdict() of dpgate's p99 over a peer's, round by round."""
    return verdict(ratios, above="higher", below="lower", digits=2)


def rotated(targets: dict, i: int) -> list:
    """The targets in the order round i runs them: each round starts one
    further along, so no target always runs first, or always right after the
    same neighbour (whose connections and caches it would inherit)."""
    order = list(targets.items())
    k = i % len(order)
    return order[k:] + order[:k]


def per_round(by_target: dict, a: str, b: str, f) -> list[float]:
    return [f(x, y) for x, y in zip(by_target[a], by_target[b])]


def report_requests(results: dict, args) -> None:
    print(f"wrk -t2 -d{args.seconds}s, small non-streaming chat body, median of {args.rounds} interleaved rounds; "
          f"dpgate {args.workers} threads, HAProxy nbthread {args.workers}, nginx {args.workers} workers, "
          f"dpgate-sim 1 thread")
    if args.baseline:
        print(f"baseline: {args.baseline}")
    print(f"{'conns':>5} {'target':<8} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'CPU s/1k req':>13} "
          f"{'req/s per CPU s':>16}")
    for c, by_target in results.items():
        for name, runs in by_target.items():
            m = {k: statistics.median(r[k] for r in runs) for k in ("rps", "p50_ms", "p99_ms", "cpu_per_1k")}
            cpu = "" if name == "direct" else f"{m['cpu_per_1k']:>13.3f} {1000 / m['cpu_per_1k']:>16.0f}"
            print(f"{c:>5} {name:<8} {m['rps']:>10.0f} {m['p50_ms']:>8.2f} {m['p99_ms']:>8.2f} {cpu}")
        for peer in PEERS + (("baseline",) if "baseline" in by_target else ()):
            # Per round: runs a few seconds apart, so the median resists drift.
            eff = per_round(by_target, "dpgate", peer, lambda d, p: p["cpu_per_1k"] / d["cpu_per_1k"])
            rps = per_round(by_target, "dpgate", peer, lambda d, p: d["rps"] / p["rps"])
            p99 = per_round(by_target, "dpgate", peer, lambda d, p: d["p99_ms"] / p["p99_ms"])
            print(f"{c:>5} dpgate/{peer}: req/s per CPU s {verdict(eff)} "
                  f"(rounds {' '.join(f'{r:.2f}' for r in eff)}); req/s {statistics.median(rps):.2f}x; "
                  f"p99 {p99_verdict(p99)} (rounds {' '.join(f'{r:.2f}' for r in p99)})")


def report_streams(streams: dict, args) -> None:
    print(f"\n{args.streams} concurrent streams for {args.stream_seconds}s each, 16 tokens at {args.stream_token_ms} ms/token, "
          f"median of {args.rounds} interleaved rounds; added = mean over events of (target - direct)")
    print(f"{'target':<8} {'streams':>8} {'events':>7} {'event p50 ms':>13} {'added p50 ms':>13} "
          f"{'added p99 ms':>13} {'CPU s/1k streams':>17}")
    for name, runs in streams.items():
        direct_runs = streams["direct"]
        p50 = statistics.median(statistics.fmean(r["p50_ms"]) for r in runs)
        add50 = statistics.median(added_ms(r, d, "p50_ms") for r, d in zip(runs, direct_runs))
        add99 = statistics.median(added_ms(r, d, "p99_ms") for r, d in zip(runs, direct_runs))
        cpu = "" if name == "direct" else f"{statistics.median(r['cpu_per_1k'] for r in runs):>17.3f}"
        print(f"{name:<8} {statistics.median(r['streams'] for r in runs):>8.0f} {runs[0]['events']:>7} "
              f"{p50:>13.2f} {add50:>13.2f} {add99:>13.2f} {cpu}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", default="32,256", help='comma-separated; "" runs the streams only')
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="dpgate threads, HAProxy threads, nginx workers")
    ap.add_argument("--streams", type=int, default=500, help="concurrent streams (0: skip the stream runs)")
    ap.add_argument("--stream-seconds", type=float, default=8.0)
    ap.add_argument("--stream-token-ms", type=int, default=100, help="the simulator's decode time per token")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON too")
    ap.add_argument("--baseline", type=Path, help="another dpgate binary to run as target 'baseline'")
    args = ap.parse_args()
    missing = [tool for tool in ("wrk", "nginx", "haproxy") if not shutil.which(tool)]
    if missing:
        print(f"needs {' '.join(missing)} (scripts/setup)", file=sys.stderr)
        return 2
    raise_nofile_limit()

    results: dict[int, dict[str, list[dict]]] = {}
    connections = [int(x) for x in args.connections.split(",") if x.strip()]
    if connections:  # --connections "": the stream runs only
        with Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS) as sim, \
                proxies(sim, args.workers, args.baseline) as (targets, pids):
            for port in targets.values():  # warm up connections and caches
                wrk(port, 32, 1)
            for c in connections:
                results[c] = {name: [] for name in targets}
                for i in range(args.rounds):
                    for name, port in rotated(targets, i):
                        results[c][name].append(wrk(port, c, args.seconds, pids[name], name))
        report_requests(results, args)

    streams: dict[str, list[dict]] = {}
    if args.streams:
        with Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS,
                 decode_us_per_token=args.stream_token_ms * 1000) as sim, \
                proxies(sim, args.workers, args.baseline) as (targets, pids):
            streams = {name: [] for name in targets}
            for i in range(args.rounds):
                for name, port in rotated(targets, i):
                    streams[name].append(stream_run(port, args.streams, args.stream_seconds, pids[name]))
        report_streams(streams, args)
    if args.json:
        print(json.dumps({"requests": results, "streams": streams}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
