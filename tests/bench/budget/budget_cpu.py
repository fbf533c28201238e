#!/usr/bin/python3
"""CPU per request with per-key budgets off, local and shared through Redis,
side by side in one run.

    tests/bench/budget/budget_cpu.py [--connections 32,256] [--rounds 16] [--seconds 3]
                                     [--workers 2] [--max-tokens 64] [--baseline NAME=BINARY ...]

Three dpgates from one binary ($DPGATE_BIN_DIR, default build/bin) in front
of one dpgate-sim (1 thread, answers of 16 tokens, prompts counted as dpgate
counts them), the same key on each:

  A  off     the key has no budgets: its use is only counted
  B  local   requests_per_min and tokens_per_min too large ever to refuse,
             decided in the process's own windows
  C  shared  the same budgets with limits.redis: a redis-server on loopback
             (started here, no persistence); every request's reservation is
             an EVALSHA the worker waits for, its settle one sent after

The request is bench_post.lua's small chat with max_tokens --max-tokens:
above the simulator's 16, so every answer gives back part of its
reservation and C sends the settle (at 16 nothing is given back and C skips
it: the cheapest case).

As tests/bench/proxy/concurrent_cpu.py does, the three are loaded at the
same time, a wrk -t1 each, for --rounds rounds (and one to warm up) per
connection count: a burst on the host slows all three alike, and the ratio
within a round keeps. CPU is each process's on-CPU time (schedstat, every
thread: for C the Redis client's thread too) per request wrk completed;
utime + stime from /proc/PID/stat is printed beside it as a check.
redis-server's own CPU is reported apart, per request of C. Ratios B/A and
C/A are per round, then their median with the median's 95 % interval
(bench_proxy.verdict) and the smallest and largest round.

--baseline adds a dpgate with C's config from another binary (say, one
built from an earlier commit in a git worktree), reported as "C NAME" with
its ratio over A and C's over it.

Every answer must be a 200: wrk's non-2xx count and its socket errors must
be 0 (a 429 would mean the budgets were too small), else the run stops.
Before the load, one request to each checks that B and C send x-ratelimit-*
headers and A does not; after it, Redis's EVALSHA count per request of C is
printed (2.00: a reserve and a settle each).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "proxy"))
sys.path.insert(0, str(HERE.parents[1] / "integration"))
import bench_proxy  # noqa: E402
from concurrent_cpu import on_cpu_ns  # noqa: E402
from harness import EXACT_SIM_COUNTS, Gateway, Sim, bin_dir, free_port, raise_nofile_limit, wait_for_port  # noqa: E402

# Far above what 2 cores serve in a minute (the limits' largest values are
# 10^9 requests and 10^12 tokens a minute): budgets that decide, and never refuse.
HUGE_BUDGETS = {"requests_per_min": 1_000_000_000, "tokens_per_min": 1_000_000_000_000}
CONFIGS = ("A off", "B local", "C shared")


def stat_ticks(pid: int) -> int:
    """utime + stime of every thread of `pid`, in clock ticks (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wrk_counts(out: str) -> dict:
    non_2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    socket = [int(x) for x in m.groups()] if (
        m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)) else [0] * 4
    return {"requests": int(re.search(r"(\d+) requests in", out).group(1)),
            "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), "non_2xx": non_2xx,
            "socket": socket}


@contextlib.contextmanager
def redis_server(directory: Path):
    """A redis-server on a loopback port, no snapshots, no append-only file: yields (port, pid)."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(directory), "--logfile", str(directory / "redis.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def evalsha_calls(port: int) -> int:
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "commandstats"], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"cmdstat_evalsha:calls=(\d+)", out)
    return int(m.group(1)) if m else 0


def configs(sim: Sim, workers: int, redis_port: int) -> dict[str, dict]:
    out = {}
    for name in CONFIGS:
        config = bench_proxy.bench_config(sim, workers)
        if name != "A off":
            config["auth"] = {**config["auth"], "keys": [{**k, **HUGE_BUDGETS} for k in config["auth"]["keys"]]}
        if name == "C shared":
            config["limits"] = {"redis": {"address": f"127.0.0.1:{redis_port}"}}
        out[name] = config
    return out


def check_headers(gws: dict[str, Gateway], body: str) -> None:
    """B and C answer with x-ratelimit-* headers, A without: the budgets are on where they should be."""
    for name, gw in gws.items():
        status, headers, _ = gw.request("POST", "/v1/chat/completions", body,
                                        headers={"Content-Type": "application/json"})
        limited = any(h.lower().startswith("x-ratelimit-") for h in headers)
        if status != 200 or limited != (name != "A off"):
            raise RuntimeError(f"{name}: status {status}, x-ratelimit headers {'present' if limited else 'absent'}")


def run_rounds(gws: dict[str, Gateway], redis_pid: int, lua: Path, connections: int, rounds: int,
               seconds: int) -> dict:
    per_request = {name: [] for name in gws}  # on-CPU us, per round
    ticks = {name: [] for name in gws}  # utime + stime us, per round
    rps = {name: [] for name in gws}
    redis_us: list[float] = []
    total_c = 0  # requests through Redis (C's and the baselines'), the warm-up's too
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    for round_index in range(rounds + 1):  # round 0 warms up
        before = {name: on_cpu_ns([gw.pid]) for name, gw in gws.items()}
        ticks_before = {name: stat_ticks(gw.pid) for name, gw in gws.items()}
        redis_before = on_cpu_ns([redis_pid])
        loads = {name: subprocess.Popen(
            ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "-s", str(lua),
             f"http://127.0.0.1:{gw.port}"], stdout=subprocess.PIPE, text=True) for name, gw in gws.items()}
        outputs = {name: load.communicate()[0] for name, load in loads.items()}
        after = {name: on_cpu_ns([gw.pid]) for name, gw in gws.items()}
        ticks_after = {name: stat_ticks(gw.pid) for name, gw in gws.items()}
        redis_after = on_cpu_ns([redis_pid])
        counts = {}
        for name, out in outputs.items():
            c = counts[name] = wrk_counts(out)
            if loads[name].returncode != 0 or c["non_2xx"] or any(c["socket"]):
                raise RuntimeError(f"{name}: the load saw failed answers:\n{out}")
        shared_requests = sum(c["requests"] for name, c in counts.items() if name.startswith("C "))
        total_c += shared_requests
        if round_index == 0:
            continue
        for name, c in counts.items():
            per_request[name].append((after[name] - before[name]) / c["requests"] / 1e3)
            ticks[name].append((ticks_after[name] - ticks_before[name]) * tick_us / c["requests"])
            rps[name].append(c["rps"])
        redis_us.append((redis_after - redis_before) / shared_requests / 1e3)
    return {"cpu": per_request, "ticks": ticks, "rps": rps, "redis": redis_us, "c_requests": total_c}


def spread(ratios: list[float]) -> str:
    return (f"{bench_proxy.verdict(ratios, above='costlier', below='cheaper')}, "
            f"rounds {min(ratios):.3f}-{max(ratios):.3f}")


def report(connections: int, result: dict, args, evalsha_per_request: float) -> None:
    cpu, ticks, rps, redis = result["cpu"], result["ticks"], result["rps"], result["redis"]
    print(f"\n{connections} connections: {args.rounds} rounds of {args.seconds} s, wrk -t1 -c{connections} on each "
          f"dpgate, all at once; dpgate {args.workers} workers, max_tokens {args.max_tokens}")
    print(f"  {'config':10s} {'req/s':>8} {'on-CPU us/req':>14} {'utime+stime us/req':>19} {'redis us/req':>13}")
    for name in cpu:
        redis_cell = f"{statistics.median(redis):13.2f}" if name == "C shared" else f"{'':13s}"
        print(f"  {name:10s} {statistics.median(rps[name]):8.0f} {statistics.median(cpu[name]):14.2f} "
              f"{statistics.median(ticks[name]):19.2f} {redis_cell}")
    a = cpu["A off"]
    for name in [n for n in cpu if n != "A off"]:
        ratios = [x / y for x, y in zip(cpu[name], a)]
        print(f"  {name[0] if name in CONFIGS else name}/A dpgate CPU per request: {spread(ratios)}")
    for name in [n for n in cpu if n not in CONFIGS]:
        ratios = [x / y for x, y in zip(cpu["C shared"], cpu[name])]
        print(f"  C/{name} dpgate CPU per request: {spread(ratios)}")
    with_redis = [(c + r) / y for c, r, y in zip(cpu["C shared"], redis, a)]
    print(f"  (C + redis-server)/A: {spread(with_redis)}")
    print("  per-round on-CPU us: " + "; ".join(f"{n} {[round(v, 1) for v in cpu[n]]}" for n in cpu))
    print(f"  EVALSHA per request of C: {evalsha_per_request:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", default="32,256", help="comma-separated, per dpgate")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="dpgate threads")
    ap.add_argument("--max-tokens", type=int, default=64,
                    help="the request's max_tokens; the simulator answers 16 tokens")
    ap.add_argument("--baseline", action="append", default=[], metavar="NAME=BINARY",
                    help="another dpgate binary with C's config (Redis)")
    args = ap.parse_args()
    missing = [tool for tool in ("wrk", "redis-server", "redis-cli") if not shutil.which(tool)]
    if missing:
        print(f"needs {' '.join(missing)}", file=sys.stderr)
        return 2
    raise_nofile_limit()
    body_lua = bench_proxy.LUA.read_text()
    lua_text, replaced = re.subn(r'"max_tokens":\d+', f'"max_tokens":{args.max_tokens}', body_lua)
    assert replaced == 1, "bench_post.lua's body has no max_tokens"
    body = re.search(r"wrk\.body = (.*?)\n\n", lua_text, re.S).group(1)
    body = "".join(re.findall(r"'([^']*)'", body))

    redis_version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
    print(f"dpgate: {bin_dir() / 'dpgate'}; redis-server {redis_version}")
    with tempfile.TemporaryDirectory(prefix="dpgate-bench-budget-") as tmp, contextlib.ExitStack() as stack:
        lua = Path(tmp) / "budget_post.lua"
        lua.write_text(lua_text)
        redis_port, redis_pid = stack.enter_context(redis_server(Path(tmp)))
        sim = stack.enter_context(Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS))
        shared = configs(sim, args.workers, redis_port)
        gws = {name: stack.enter_context(Gateway(config)) for name, config in shared.items()}
        for spec in args.baseline:
            name, _, binary = spec.partition("=")
            gws[f"C {name}"] = stack.enter_context(Gateway(shared["C shared"], binary=Path(binary)))
        check_headers(gws, body)
        for connections in [int(c) for c in args.connections.split(",") if c.strip()]:
            calls_before = evalsha_calls(redis_port)
            result = run_rounds(gws, redis_pid, lua, connections, args.rounds, args.seconds)
            evalsha = (evalsha_calls(redis_port) - calls_before) / result["c_requests"]
            report(connections, result, args, evalsha)
    return 0


if __name__ == "__main__":
    sys.exit(main())
