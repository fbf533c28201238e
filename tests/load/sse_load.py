#!/usr/bin/python3
"""N concurrent SSE streams through dpgate for D seconds, against dpgate-sim.

    DPGATE_BIN_DIR=build/bin tests/load/sse_load.py [--streams 2000] [--seconds 180]

Starts one dpgate-sim (with a decode delay, so every stream lasts a while)
and one dpgate in front of it, then keeps `--streams` chat completion streams
open at all times for `--seconds`: each client opens a connection, streams an
answer to its `[DONE]`, closes and starts the next one. Clients are raw
asyncio sockets (an asyncio.Protocol each), so the load generator stays cheap
next to the processes it measures.

Reports: errors (anything but a 200 event stream that ends in `[DONE]` with
a clean terminal chunk), streams completed, dpgate's resident memory at idle
and at peak (total and per stream), and dpgate's file descriptors at start,
peak and end (end = after the load, once idle upstream connections retired).
Exit status 1 when there was an error or the fd count did not come back.

The engine (`run_load`) is also used by tests/integration/test_robustness.py
with a CI-sized load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from harness import (CLIENT_KEY, MODEL, Gateway, Sim, fd_count, gateway_config, http_json,  # noqa: E402
                     raise_nofile_limit, rss_kib)


@dataclass
class LoadStats:
    started: int = 0
    completed: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    events: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    max_connect_s: float = 0.0
    max_loop_lag_s: float = 0.0  # how late this process's own event loop ran (it shares the CPUs)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 20:
            self.error_samples.append(what)


class _StreamProtocol(asyncio.Protocol):
    """Reads one HTTP/1.1 response: the status line and headers, then a
    chunked body, counting SSE events. `done` resolves to None when the
    stream ended cleanly with `[DONE]`, or to a description of what went wrong."""

    def __init__(self, request: bytes, done: asyncio.Future):
        self.request = request
        self.done = done
        self.buf = bytearray()
        self.head_done = False
        self.chunk_left = -1  # -1: expecting a chunk-size line
        self.body = b""  # the last bytes seen, so a marker split over two reads is found
        self.events = 0
        self.saw_done = False
        self.saw_error = False
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def _finish(self, outcome):
        if not self.done.done():
            self.done.set_result(outcome)
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.done.done():
            return
        self.buf += data
        if not self.head_done:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            del self.buf[:end + 4]
            self.head_done = True
            status_line, *fields = head.split("\r\n")
            status = status_line.split(" ", 2)[1]
            headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
            if status != "200":
                return self._finish(f"status {status}: {bytes(self.buf[:300])!r}")
            if "chunked" not in headers.get("transfer-encoding", ""):
                return self._finish("not chunked: " + json.dumps(headers))
        self._parse_chunks()

    def _parse_chunks(self) -> None:
        # States: chunk_left == -1 wants a size line, > 0 wants that much
        # data, == 0 wants the CRLF that ends a chunk's data.
        buf = self.buf
        pos = 0
        while pos < len(buf) or self.chunk_left == -1:
            if self.chunk_left == -1:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(bytes(buf[pos:eol]).split(b";")[0], 16)
                pos = eol + 2
                if size == 0:
                    del buf[:pos]
                    if self.saw_error:
                        return self._finish("error event with a clean end")
                    if not self.saw_done:
                        return self._finish("clean end without [DONE]")
                    return self._finish(None)
                self.chunk_left = size
            elif self.chunk_left > 0:
                take = min(self.chunk_left, len(buf) - pos)
                piece = bytes(buf[pos:pos + take])
                tail = self.body + piece
                self.events += piece.count(b"\n\n") + (self.body.endswith(b"\n") and piece.startswith(b"\n"))
                if b"[DONE]" in tail:
                    self.saw_done = True
                if b'"error"' in tail:
                    self.saw_error = True
                self.body = tail[-16:]
                pos += take
                self.chunk_left -= take
            else:
                if len(buf) - pos < 2:
                    break
                pos += 2
                self.chunk_left = -1
        del buf[:pos]

    def connection_lost(self, exc) -> None:
        if self.saw_error:
            self._finish("stream broke with an error event")
        else:
            self._finish(f"connection lost before the end ({exc or 'EOF'}, {self.events} events)")


def stream_request(port: int, n: int, max_tokens: int) -> bytes:
    body = json.dumps({"model": MODEL, "stream": True, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": f"load stream {n}: tell me a long story"}]}).encode()
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {CLIENT_KEY}\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _client(port: int, index: int, start_at: float, stop_at: float, max_tokens: int,
                  stream_timeout: float, stats: LoadStats) -> None:
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    n = 0
    while time.monotonic() < stop_at:
        n += 1
        done = loop.create_future()
        stats.started += 1
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        protocol = None
        phase = "connect"
        try:
            request = stream_request(port, index * 1_000_000 + n, max_tokens)
            connect_start = time.monotonic()
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: _StreamProtocol(request, done), "127.0.0.1", port), 30)
            stats.max_connect_s = max(stats.max_connect_s, time.monotonic() - connect_start)
            phase = "stream"
            outcome = await asyncio.wait_for(done, stream_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            outcome = f"{phase}: {type(e).__name__}: {e}"
            if protocol is not None and protocol.transport is not None:
                protocol.transport.abort()
        finally:
            stats.in_flight -= 1
        if protocol is not None:
            stats.events += protocol.events
        if outcome is None:
            stats.completed += 1
        else:
            stats.error(f"client {index} stream {n}: {outcome}")
            await asyncio.sleep(0.1)  # no hot loop against a gateway that refuses


async def _watch_lag(stop: asyncio.Event, stats: LoadStats) -> None:
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(0.1)
        stats.max_loop_lag_s = max(stats.max_loop_lag_s, time.monotonic() - before - 0.1)


async def _sample(pid: int, stop: asyncio.Event, samples: list, stats: LoadStats, every: float) -> None:
    while not stop.is_set():
        try:
            samples.append((time.monotonic(), rss_kib(pid), fd_count(pid), stats.in_flight))
        except (OSError, RuntimeError):
            pass
        try:
            await asyncio.wait_for(stop.wait(), every)
        except asyncio.TimeoutError:
            pass


async def _run(port: int, pid: int, streams: int, seconds: float, ramp_s: float, max_tokens: int,
               stream_timeout: float, sample_every: float) -> tuple[LoadStats, list]:
    stats = LoadStats()
    samples: list = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample(pid, stop, samples, stats, sample_every))
    lag = asyncio.create_task(_watch_lag(stop, stats))
    now = time.monotonic()
    stop_at = now + seconds
    clients = [asyncio.create_task(_client(port, i, now + ramp_s * i / streams, stop_at, max_tokens,
                                           stream_timeout, stats)) for i in range(streams)]
    await asyncio.gather(*clients)
    stop.set()
    await sampler
    await lag
    return stats, samples


@dataclass
class LoadReport:
    streams: int
    seconds: float
    wall_s: float
    stats: LoadStats
    idle_rss_kib: int
    peak_rss_kib: int
    fd_start: int
    fd_peak: int
    fd_end: int
    busiest_streams: int  # streams in dpgate at the busiest sample (2 fds each: client and upstream)
    busiest_rss_kib: int  # dpgate's RSS at that sample

    @property
    def rss_per_stream_kib(self) -> float:
        return (self.busiest_rss_kib - self.idle_rss_kib) / max(1, self.busiest_streams)

    def text(self) -> str:
        s = self.stats
        return "\n".join([
            f"streams (concurrent)    {self.streams} for {self.seconds:.0f} s (wall {self.wall_s:.1f} s)",
            f"streams completed       {s.completed} of {s.started} started; {s.events} events",
            f"errors                  {s.errors}",
            f"peak streams in flight  {s.peak_in_flight} (slowest connect {s.max_connect_s:.2f} s; "
            f"load generator's worst event-loop lag {s.max_loop_lag_s:.2f} s)",
            f"dpgate RSS idle         {self.idle_rss_kib / 1024:.1f} MiB",
            f"dpgate RSS peak         {self.peak_rss_kib / 1024:.1f} MiB (+{(self.peak_rss_kib - self.idle_rss_kib) / 1024:.1f} MiB)",
            f"dpgate RSS busiest      {self.busiest_rss_kib / 1024:.1f} MiB with {self.busiest_streams} streams in dpgate "
            f"= {self.rss_per_stream_kib:.1f} KiB per stream above idle",
            f"dpgate fds              start {self.fd_start}, peak {self.fd_peak}, end {self.fd_end}",
        ] + [f"  error: {e}" for e in s.error_samples[:10]])


def settle_fds(gw: Gateway, idle_timeout_ms: int, rounds: int = 24) -> int:
    """The fd count once the load is over: after the upstream idle timeout,
    a few requests make every worker's pool retire its stale connections
    (they are dropped when next acquired, not on a timer)."""
    time.sleep(idle_timeout_ms / 1000 + 0.5)
    for _ in range(rounds):
        http_json(gw.port, "GET", "/health")
        gw.json("POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 1,
                                                 "messages": [{"role": "user", "content": "settle"}]})
    time.sleep(0.3)
    return fd_count(gw.pid)


def run_load(gw: Gateway, streams: int, seconds: float, max_tokens: int, ramp_s: float | None = None,
             stream_timeout: float = 120.0, sample_every: float = 1.0, idle_timeout_ms: int = 1000) -> LoadReport:
    """Runs the load against a started gateway; see the module docstring."""
    ramp_s = min(5.0, seconds / 4) if ramp_s is None else ramp_s
    settle_fds(gw, idle_timeout_ms)
    fd_start = fd_count(gw.pid)
    idle_rss = rss_kib(gw.pid)
    started = time.monotonic()
    stats, samples = asyncio.run(_run(gw.port, gw.pid, streams, seconds, ramp_s, max_tokens,
                                      stream_timeout, sample_every))
    wall = time.monotonic() - started
    fd_end = settle_fds(gw, idle_timeout_ms)
    peak = max(samples, key=lambda s: s[1]) if samples else (0, idle_rss, fd_start, 0)
    busiest = max(samples, key=lambda s: s[2]) if samples else (0, idle_rss, fd_start, 0)
    return LoadReport(streams=streams, seconds=seconds, wall_s=wall, stats=stats, idle_rss_kib=idle_rss,
                      peak_rss_kib=peak[1], fd_start=fd_start, fd_peak=max((s[2] for s in samples), default=fd_start),
                      fd_end=fd_end, busiest_streams=max(1, (busiest[2] - fd_start) // 2), busiest_rss_kib=busiest[1])


def load_config(sim: Sim, idle_timeout_ms: int = 1000, threads: int = 0) -> dict:
    # Long streams must not trip the idle deadlines; pooled upstream
    # connections retire quickly so the fd count can come back to baseline.
    # Health probes get a patient timeout: a simulator serving 2,000 streams
    # on a shared 2-core machine can take over a second to answer /health,
    # and the load measures dpgate's relay, not its health policy.
    return gateway_config([("primary", sim, "primary")], threads=threads,
                          limits={"upstream_idle_timeout_ms": idle_timeout_ms, "max_connections": 50000},
                          health={"interval_ms": 1000, "timeout_ms": 5000, "fall": 3, "rise": 1},
                          log={"access": "off"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=2000, help="concurrent streams (default 2000)")
    parser.add_argument("--seconds", type=float, default=180, help="duration of the load (default 180)")
    parser.add_argument("--tokens", type=int, default=20, help="tokens per stream (default 20)")
    parser.add_argument("--decode-us-per-token", type=int, default=500_000,
                        help="simulated decode time per token (default 500000: a 20-token stream lasts 10 s)")
    parser.add_argument("--threads", type=int, default=0, help="dpgate I/O threads (default 0 = one per core)")
    parser.add_argument("--sim-threads", type=int, default=2, help="dpgate-sim threads (default 2)")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()

    soft, hard = raise_nofile_limit()
    print(f"RLIMIT_NOFILE of this process and its children: soft {soft}, hard {hard}")
    need = args.streams * 3 + 256
    if soft < need:
        print(f"warning: {args.streams} streams need about {need} descriptors in dpgate; the limit is {soft}")

    with Sim(decode_us_per_token=args.decode_us_per_token, max_output=args.tokens, threads=args.sim_threads) as sim:
        with Gateway(load_config(sim, threads=args.threads)) as gw:
            limits = Path(f"/proc/{gw.pid}/limits").read_text().splitlines()
            print("dpgate " + next(l for l in limits if l.startswith("Max open files")).strip())
            report = run_load(gw, args.streams, args.seconds, args.tokens)
            print(report.text())
            if args.json:
                print(json.dumps({"streams": report.streams, "seconds": report.seconds,
                                  "completed": report.stats.completed, "errors": report.stats.errors,
                                  "events": report.stats.events, "idle_rss_kib": report.idle_rss_kib,
                                  "peak_rss_kib": report.peak_rss_kib,
                                  "busiest_streams": report.busiest_streams, "busiest_rss_kib": report.busiest_rss_kib,
                                  "rss_per_stream_kib": round(report.rss_per_stream_kib, 2),
                                  "fd_start": report.fd_start, "fd_peak": report.fd_peak, "fd_end": report.fd_end}))
            alive = gw.process.alive()
            if report.stats.errors:
                warnings = [l for l in gw.process.stderr().splitlines() if " warn" in l or " error" in l]
                print(f"dpgate logged {len(warnings)} warnings; the first ones:")
                print("\n".join("  " + l for l in warnings[:15]))
    ok = report.stats.errors == 0 and report.fd_end <= report.fd_start + 4 and alive
    if not alive:
        print("dpgate died during the load")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
