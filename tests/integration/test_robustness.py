"""dpgate under abuse, with real processes: hundreds of slowloris connections
(dribbled headers, dribbled bodies) and a CI-sized load of concurrent SSE
streams. What a normal client sees meanwhile is measured, and dpgate's file
descriptors must come back to where they were."""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import (CLIENT_KEY, Gateway, Sim, chat_body, fd_count, gateway_config, is_sanitized,
                     raise_nofile_limit, wait_fd_count)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "load"))
import sse_load  # noqa: E402

CHAT = "/v1/chat/completions"
SLOW_CONNECTIONS = 320
HEADER_TIMEOUT_S = 2.0
BODY_IDLE_TIMEOUT_S = 2.0
DRIBBLE_INTERVAL_S = 0.5
# How late after its deadline a slow connection may still be cut: the
# machine running CI is small and shared.
CUT_MARGIN_S = 1.5


@pytest.fixture(scope="module", autouse=True)
def descriptors():
    # Hundreds of sockets here, twice that in dpgate and the sim (which
    # inherit this limit).
    soft, _ = raise_nofile_limit()
    if soft < 3 * SLOW_CONNECTIONS + 256:
        pytest.skip(f"RLIMIT_NOFILE is {soft}: too low for {SLOW_CONNECTIONS} connections")


class Dribblers:
    """`count` connections that each send `prefix` at once, then one byte of
    `drip` every `interval` seconds for `dribble_s` seconds (None: until cut),
    then nothing. Runs in one thread over a selector and records, per
    connection, when its last byte went out and when dpgate closed it (EOF or
    reset) and what, if anything, it answered."""

    def __init__(self, port: int, count: int, prefix: bytes, drip: bytes, interval: float,
                 dribble_s: float | None):
        self.port = port
        self.prefix = prefix
        self.drip = drip
        self.interval = interval
        self.dribble_s = dribble_s
        self.socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
        self.first_sent = [0.0] * count
        self.last_sent = [0.0] * count
        self.closed_at: list[float | None] = [None] * count
        self.replies = [b""] * count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Dribblers":
        self.started = time.monotonic()
        for i, s in enumerate(self.socks):
            s.sendall(self.prefix)
            self.first_sent[i] = self.last_sent[i] = time.monotonic()
            s.setblocking(False)
        self._thread.start()
        return self

    def _closed(self, i: int, sel: selectors.BaseSelector) -> None:
        if self.closed_at[i] is None:
            self.closed_at[i] = time.monotonic()
            sel.unregister(self.socks[i])

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for i, s in enumerate(self.socks):
            sel.register(s, selectors.EVENT_READ, i)
        next_drip = self.started + self.interval
        n = 0
        while not self._stop.is_set() and any(c is None for c in self.closed_at):
            timeout = max(0.0, next_drip - time.monotonic())
            for key, _ in sel.select(timeout):
                i = key.data
                try:
                    data = self.socks[i].recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    self.replies[i] += data
                else:
                    self._closed(i, sel)
            now = time.monotonic()
            if now >= next_drip:
                next_drip += self.interval
                dribbling = self.dribble_s is None or now - self.started < self.dribble_s
                if dribbling:
                    byte = self.drip[n % len(self.drip):n % len(self.drip) + 1]
                    n += 1
                    for i, s in enumerate(self.socks):
                        if self.closed_at[i] is not None:
                            continue
                        try:
                            s.send(byte)
                            self.last_sent[i] = time.monotonic()
                        except BlockingIOError:
                            pass
                        except OSError:
                            self._closed(i, sel)
        sel.close()

    def wait(self, timeout: float) -> None:
        self._thread.join(timeout)

    def open_count(self) -> int:
        return sum(1 for c in self.closed_at if c is None)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.socks:
            s.close()


class LatencyProbe:
    """A normal client that keeps making small chat completions on fresh
    connections and records each one's latency and status."""

    def __init__(self, gw: Gateway):
        self.gw = gw
        self.latencies: list[float] = []
        self.failures: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            start = time.monotonic()
            try:
                status, _, body = self.gw.json("POST", CHAT, chat_body(f"probe {n}", max_tokens=2), timeout=10)
            except OSError as e:
                status, body = None, repr(e)
            self.latencies.append(time.monotonic() - start)
            if status != 200:
                self.failures.append((status, body))
            time.sleep(0.05)

    def __enter__(self) -> "LatencyProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)


def _warm_baseline(gw: Gateway) -> int:
    """dpgate's fd count at rest, after some traffic has filled the upstream
    pools as normal traffic does (one idle connection per worker)."""
    for i in range(20):
        assert gw.json("POST", CHAT, chat_body(f"warm {i}", max_tokens=1))[0] == 200
    time.sleep(0.3)
    return fd_count(gw.pid)


def _assert_back_to_baseline(gw: Gateway, baseline: int) -> None:
    for i in range(20):  # the same traffic as for the baseline
        assert gw.json("POST", CHAT, chat_body(f"after {i}", max_tokens=1))[0] == 200
    now = wait_fd_count(gw.pid, baseline + 2, timeout=5)
    assert now <= baseline + 2, f"dpgate holds {now} fds, {baseline} before the slow connections"
    deadline = time.monotonic() + 5
    while gw.admin("GET", "/admin/status")[2]["open_connections"] > 0:
        assert time.monotonic() < deadline, "dpgate still counts open client connections"
        time.sleep(0.05)


@pytest.fixture
def slow_gateway():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], threads=2,
                                limits={"header_timeout_ms": int(HEADER_TIMEOUT_S * 1000),
                                        "body_idle_timeout_ms": int(BODY_IDLE_TIMEOUT_S * 1000)},
                                log={"access": "off"})
        with Gateway(config) as gw:
            yield gw


def test_dribbled_headers_are_cut_at_the_header_deadline_and_others_stay_fast(slow_gateway):
    gw = slow_gateway
    baseline = _warm_baseline(gw)
    # A header that never ends: one more byte of a header value every 0.5 s.
    prefix = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: "
    with LatencyProbe(gw) as probe:
        slow = Dribblers(gw.port, SLOW_CONNECTIONS, prefix, b"abcdefgh", DRIBBLE_INTERVAL_S, None).start()
        try:
            slow.wait(HEADER_TIMEOUT_S + CUT_MARGIN_S + 3)
            still_open = slow.open_count()
        finally:
            slow.close()
    assert still_open == 0, f"{still_open} of {SLOW_CONNECTIONS} dribbling connections outlived their deadline"
    cut_after = [c - f for c, f in zip(slow.closed_at, slow.first_sent)]
    assert min(cut_after) >= HEADER_TIMEOUT_S - 0.1, f"cut before the deadline: {min(cut_after):.2f}s"
    assert max(cut_after) <= HEADER_TIMEOUT_S + CUT_MARGIN_S, \
        f"cut {max(cut_after):.2f}s after the first byte; the header deadline is {HEADER_TIMEOUT_S}s"
    # Closed without an answer (as nginx does), or with a 408 at most.
    assert all(r == b"" or r.startswith(b"HTTP/1.1 408") for r in slow.replies), [r for r in slow.replies if r][:1]
    assert probe.failures == []
    assert len(probe.latencies) >= 10
    assert max(probe.latencies) < 1.0, f"a normal request took {max(probe.latencies):.2f}s"
    _assert_back_to_baseline(gw, baseline)


def test_dribbled_bodies_live_while_they_progress_and_are_cut_once_idle(slow_gateway):
    gw = slow_gateway
    baseline = _warm_baseline(gw)
    body = json.dumps(chat_body("slow body " + "x" * 200)).encode()
    prefix = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + CLIENT_KEY.encode() + b"\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body)) + body[:1]
    # Two idle deadlines' worth of dribbling (one byte per 0.5 s), then silence.
    dribble_s = 2 * BODY_IDLE_TIMEOUT_S
    with LatencyProbe(gw) as probe:
        slow = Dribblers(gw.port, SLOW_CONNECTIONS, prefix, body[1:], DRIBBLE_INTERVAL_S, dribble_s).start()
        try:
            time.sleep(dribble_s - 0.2)
            alive_while_dribbling = slow.open_count()
            slow.wait(dribble_s + BODY_IDLE_TIMEOUT_S + CUT_MARGIN_S + 3)
            still_open = slow.open_count()
        finally:
            slow.close()
    # body_idle_timeout_ms is a deadline between reads, not for the whole
    # body: a body that keeps coming is not cut.
    assert alive_while_dribbling == SLOW_CONNECTIONS, \
        f"only {alive_while_dribbling} dribbling bodies survived past the idle deadline while still sending"
    assert still_open == 0, f"{still_open} of {SLOW_CONNECTIONS} stalled bodies outlived their idle deadline"
    idle_for = [c - last for c, last in zip(slow.closed_at, slow.last_sent)]
    assert min(idle_for) >= BODY_IDLE_TIMEOUT_S - 0.1, f"cut {min(idle_for):.2f}s after the last byte"
    assert max(idle_for) <= BODY_IDLE_TIMEOUT_S + CUT_MARGIN_S, \
        f"cut {max(idle_for):.2f}s after the last byte; the body idle deadline is {BODY_IDLE_TIMEOUT_S}s"
    assert all(r == b"" or r.startswith(b"HTTP/1.1 408") for r in slow.replies), \
        [r for r in slow.replies if r][:1]
    assert probe.failures == []
    assert len(probe.latencies) >= 10
    assert max(probe.latencies) < 1.0, f"a normal request took {max(probe.latencies):.2f}s"
    _assert_back_to_baseline(gw, baseline)


def _vm_size_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1])
    raise RuntimeError("no VmSize")


def test_a_declared_body_does_not_reserve_memory_before_it_arrives(slow_gateway):
    gw = slow_gateway
    if is_sanitized(gw.pid):
        pytest.skip("ASan shadows every reservation: the probe itself would cost gigabytes")
    before = _vm_size_kib(gw.pid)
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + CLIENT_KEY.encode() +
            b"\r\nContent-Type: application/json\r\nContent-Length: 200000000\r\n\r\n{")
    socks = [socket.create_connection(("127.0.0.1", gw.port), timeout=5) for _ in range(8)]
    try:
        for s in socks:
            s.sendall(head)
        time.sleep(0.5)
        grown_mib = (_vm_size_kib(gw.pid) - before) / 1024
    finally:
        for s in socks:
            s.close()
    # Eight connections that sent one byte each: a few relay buffers, not 1.6 GB.
    assert grown_mib < 256, f"dpgate's address space grew by {grown_mib:.0f} MiB for 8 one-byte bodies"


def _huge_kib_by_mapping(pid: int) -> list[tuple[str, str, str, int]]:
    """Every mapping of the process: (range, permissions, path, AnonHugePages KiB)."""
    mappings = []
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].endswith(":"):
            mappings.append([fields[0], fields[1], fields[5] if len(fields) > 5 else "", 0])
        elif fields and fields[0] == "AnonHugePages:":
            mappings[-1][3] = int(fields[1])
    return [tuple(m) for m in mappings]


def _plain(name: str) -> bool:
    """Whether DPGATE_PLAIN turns the fast path `name` off in this run."""
    value = os.environ.get("DPGATE_PLAIN", "").strip()
    return value == "1" or name in (n.strip() for n in value.split(","))


def _thp_mode() -> str:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return ""
    return text[text.index("[") + 1:text.index("]")] if "[" in text else ""


@pytest.mark.parametrize("huge_pages", [True, False])
def test_the_heap_is_in_huge_pages_unless_configured_off(huge_pages):
    """huge_pages (default true): the heap comes from the kernel in 2 MiB
    transparent huge pages, so a request's scattered state costs a few TLB
    entries, not one per 4 KiB page; false leaves it in small pages."""
    mode = _thp_mode()
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")], huge_pages=huge_pages)) as gw:
        for i in range(50):
            status, _, _ = gw.json("POST", "/v1/chat/completions", chat_body(f"turn {i}"))
            assert status == 200
        log = gw.process.stderr()
        maps = Path(f"/proc/{gw.pid}/maps").read_text()
        # The heap is the writable anonymous memory (tcmalloc grows it by sbrk,
        # "[heap]", then by mmap).
        huge_kib = sum(kib for _, perms, path, kib in _huge_kib_by_mapping(gw.pid)
                       if perms.startswith("rw") and path in ("", "[heap]"))
    if not huge_pages:
        assert "heap: 4 KiB pages (huge_pages: false)" in log, log
        if mode != "always":  # "always" gives the kernel's own huge pages to any large enough region
            assert huge_kib == 0, f"{huge_kib} KiB in huge pages with huge_pages: false"
        return
    if _plain("heap_pages"):
        # The fast path's plain twin (common/fast_paths.hpp): the allocator's own pages.
        assert "heap: 4 KiB pages (DPGATE_PLAIN: heap_pages off)" in log, log
        if mode != "always":
            assert huge_kib == 0, f"{huge_kib} KiB in huge pages with DPGATE_PLAIN"
        return
    if "libasan" in maps or "libtsan" in maps:
        assert "built without tcmalloc" in log, log
        pytest.skip("a sanitizer build: its allocator, not tcmalloc, holds the heap")
    assert "libtcmalloc" in maps, "a release dpgate is linked with tcmalloc"
    if mode in ("", "never"):
        assert f"heap: 4 KiB pages (the kernel's transparent huge pages are {mode or 'absent'})" in log, log
        assert huge_kib == 0
        return
    assert f"heap: 2 MiB pages where the kernel has them (transparent huge pages: {mode})" in log, log
    # The tokenizer's tables alone fill several; 2 MiB is the least that shows any.
    assert huge_kib >= 2048, f"only {huge_kib} KiB of the heap in huge pages"


def test_concurrent_sse_streams_have_no_errors_and_leave_no_descriptors():
    """CI-sized version of tests/load/sse_load.py: 2,000 concurrent streams
    of ~8 s each (10 tokens, 800 ms apart), reconnecting for 15 s; 500 under
    ASan, which is several times slower. Streams are long and sparse so that
    they overlap even when the load generator itself lags (it shares two
    cores with dpgate and the simulator)."""
    streams, seconds = 2000, 15
    with Sim(decode_us_per_token=800_000, max_output=10, threads=2) as sim:
        with Gateway(sse_load.load_config(sim)) as gw:
            if is_sanitized(gw.pid):
                streams = 500
            soft, _ = raise_nofile_limit()
            if soft < 3 * streams + 256:
                pytest.skip(f"RLIMIT_NOFILE is {soft}: too low for {streams} streams")
            report = sse_load.run_load(gw, streams, seconds, max_tokens=10, ramp_s=2.0, stream_timeout=40,
                                       sample_every=0.25)
            print(report.text())
            assert gw.process.alive()
    assert report.stats.errors == 0, report.text()
    assert report.stats.peak_in_flight == streams, report.text()
    # dpgate held (nearly) all of them at once: two sockets per stream.
    assert report.busiest_streams >= 0.9 * streams, report.text()
    # Every client finished a stream, and second streams on new connections finished too.
    assert report.stats.completed > streams, report.text()
    assert report.fd_end <= report.fd_start + 4, report.text()
