#!/usr/bin/python3
"""What a long admission does to the other requests on its worker
(docs/BENCHMARKS.md).

    tests/bench/proxy/admission_stall.py [--binary DPGATE] [--big-mb 3] [--big 4]

One dpgate worker thread in front of dpgate-sim (150 tokens at 20 ms each).
A stream runs alone, then beside --big requests of --big-mb MB of text
nothing has counted yet, sent one after the other on another connection.
Prints the largest and median gap between the stream's events, with
admission offloaded (the default limits.offload_admission_bytes) and with
it on the worker (offload_admission_bytes: 0), in the same run. Then what
the hop to the admission thread costs: one 234 KB request (two messages of
100 KB, warm after the first) end to end, 300 times, both ways.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from harness import CLIENT_KEY, MODEL, Gateway, Sim, bin_dir, gateway_config  # noqa: E402

HEADERS = {"Authorization": f"Bearer {CLIENT_KEY}", "Content-Type": "application/json"}
WORDS = ["the", "model", "gateway", "tokens", "window", "函数", "données", "request", "cache", "omega"]


def cold_body(seed: int, size: int) -> str:
    rng = random.Random(seed)
    parts, n = [], 0
    while n < size:
        word = f"{rng.choice(WORDS)}{rng.randrange(1_000_000)} "
        parts.append(word)
        n += len(word)
    return json.dumps({"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "".join(parts)}]})


def stream_gaps(port: int, gaps: list[float]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"model": MODEL, "max_tokens": 150, "stream": True, "messages": [{"role": "user", "content": "stream"}]}
    conn.request("POST", "/v1/chat/completions", json.dumps(body), HEADERS)
    response = conn.getresponse()
    last = None
    while line := response.fp.readline():
        if not line.startswith(b"data:"):
            continue
        now = time.monotonic()
        if last is not None:
            gaps.append(now - last)
        last = now
        if b"[DONE]" in line:
            break


def big_requests(port: int, bodies: list[str]) -> list[int]:
    statuses = []
    for body in bodies:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("POST", "/v1/chat/completions", body, HEADERS)
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
        time.sleep(0.3)
    return statuses


def hop_latency(port: int, body: str, times: int = 300) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, HEADERS)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"status {response.status}")
        seconds.append(time.perf_counter() - started)
    return sorted(seconds[50:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", type=Path, default=bin_dir() / "dpgate")
    ap.add_argument("--big-mb", type=float, default=3.0)
    ap.add_argument("--big", type=int, default=4)
    args = ap.parse_args()
    seed = 0
    print(f"one worker; a stream of 150 events at 20 ms; beside it {args.big} requests of {args.big_mb} MB cold text")
    print(f"{'admission':16s} {'stream':10s} {'events':>6s} {'median ms':>9s} {'max ms':>7s}  big requests")
    with Sim(dp=8, decode_us_per_token=20000, max_output=150, threads=2) as sim:
        for label, limits in (("offloaded", {}), ("on the worker", {"offload_admission_bytes": 0})):
            config = gateway_config([("primary", sim, "primary")], threads=1, limits=limits,
                                    log={"level": "warn", "access": "off"})
            with Gateway(config, binary=args.binary, timeout=60) as gw:
                for beside in (False, True):
                    bodies = []
                    if beside:
                        bodies = [cold_body(seed + i, int(args.big_mb * (1 << 20))) for i in range(args.big)]
                        seed += args.big
                    gaps: list[float] = []
                    streamer = threading.Thread(target=stream_gaps, args=(gw.port, gaps))
                    streamer.start()
                    statuses = []
                    if beside:
                        time.sleep(0.3)
                        statuses = big_requests(gw.port, bodies)
                    streamer.join()
                    gaps.sort()
                    if not gaps:
                        print(f"{label}: the stream gave no events", file=sys.stderr)
                        return 1
                    print(f"{label:16s} {'beside' if beside else 'alone':10s} {len(gaps) + 1:6d} "
                          f"{1000 * gaps[len(gaps) // 2]:9.1f} {1000 * gaps[-1]:7.1f}  {statuses}")
    rng = random.Random(5)
    text = lambda: " ".join(f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(11_000))  # noqa: E731
    body = json.dumps({"model": MODEL, "max_tokens": 1,
                       "messages": [{"role": "system", "content": text()}, {"role": "user", "content": text()}]})
    print(f"one {len(body) // 1000} KB request end to end, 250 after 50 warm-up, one at a time")
    with Sim(threads=1) as sim:
        for label, limits in (("offloaded", {}), ("on the worker", {"offload_admission_bytes": 0})):
            config = gateway_config([("primary", sim, "primary")], threads=1, limits=limits,
                                    log={"level": "warn", "access": "off"})
            with Gateway(config, binary=args.binary, timeout=60) as gw:
                seconds = hop_latency(gw.port, body)
                print(f"{label:16s} median {1e6 * statistics.median(seconds):7.0f} us  "
                      f"p90 {1e6 * seconds[int(len(seconds) * 0.9)]:7.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
