"""A soak of hostile connections under normal traffic, through a real
gateway and simulator, in about half a minute: hundreds of idle keep-alive
connections, silent ones that never send a byte (reconnecting each time the
header timeout cuts them), dribbled heads and dribbled bodies, all held while
normal clients make requests. Every normal request must succeed, and once the
crowd leaves nothing may be left behind: no open connection, no descriptor,
no buffered body byte, and resident memory near where it was."""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time

import pytest

from harness import (ADMIN_TOKEN, CLIENT_KEY, Gateway, Sim, chat_body, fd_count, gateway_config, http_request,
                     is_sanitized, metric_sample, poll, raise_nofile_limit, rss_kib)

CHAT = "/v1/chat/completions"
SOAK_SECONDS = 20
IDLE, SILENT, SLOW_HEADS, SLOW_BODIES = 300, 100, 40, 40
DRIP_INTERVAL_S = 0.5
NORMAL_CLIENTS = 3


def scrape(gw: Gateway) -> str:
    status, _, raw = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200
    return raw.decode()


def upstream_sockets(pid: int, backend_port: int) -> int:
    """The process's TCP sockets connected to `backend_port` (its upstream pool)."""
    remote_port = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                remote_port[fields[9]] = int(fields[2].rsplit(":", 1)[1], 16)
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and remote_port.get(target[8:-1]) == backend_port:
            count += 1
    return count


class Crowd:
    """The hostile connections, run by one thread over a selector. Each kind
    keeps its number: a connection the gateway closes is opened again."""

    KINDS = {"idle": IDLE, "silent": SILENT, "slow_head": SLOW_HEADS, "slow_body": SLOW_BODIES}

    def __init__(self, port: int):
        self.port = port
        self.sel = selectors.DefaultSelector()
        self.conns: dict[socket.socket, dict] = {}
        self.cuts = {kind: 0 for kind in self.KINDS}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.errors: list[str] = []

    def _open(self, kind: str) -> None:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        state = {"kind": kind, "sent": 0}
        if kind == "idle":
            # One request, then idle between requests for the rest of the soak.
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        elif kind == "slow_body":
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + CLIENT_KEY.encode() +
                      b"\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n")
        s.setblocking(False)
        self.conns[s] = state
        self.sel.register(s, selectors.EVENT_READ)

    def _drop(self, s: socket.socket) -> str:
        kind = self.conns.pop(s)["kind"]
        self.sel.unregister(s)
        s.close()
        return kind

    def start(self) -> "Crowd":
        for kind, count in self.KINDS.items():
            for _ in range(count):
                self._open(kind)
        self.thread.start()
        return self

    def _run(self) -> None:
        next_drip = time.monotonic() + DRIP_INTERVAL_S
        while not self.stop.is_set():
            for key, _ in self.sel.select(max(0.0, next_drip - time.monotonic())):
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    continue  # the idle ones' /health answers
                kind = self._drop(s)
                self.cuts[kind] += 1
                if kind == "idle":
                    self.errors.append("an idle keep-alive connection was closed before its timeout")
                try:
                    self._open(kind)
                except OSError as e:
                    self.errors.append(f"reopening a {kind} connection: {e}")
            if time.monotonic() >= next_drip:
                next_drip += DRIP_INTERVAL_S
                for s, state in list(self.conns.items()):
                    if state["kind"] not in ("slow_head", "slow_body"):
                        continue
                    byte = b"G" if state["kind"] == "slow_head" and state["sent"] == 0 else b"x"
                    try:
                        s.send(byte)
                        state["sent"] += 1
                    except BlockingIOError:
                        pass
                    except OSError:
                        pass  # cut: the read side sees it

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for s in list(self.conns):
            self._drop(s)
        self.sel.close()


def normal_client(gw: Gateway, until: float, failures: list, done: list) -> None:
    """Small chat completions, each on a fresh connection, until `until`."""
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            status, _, body = gw.json("POST", CHAT, chat_body(f"normal {n}", max_tokens=2), timeout=30)
            if status != 200:
                failures.append((status, body))
        except Exception as e:  # noqa: BLE001 — every failure is the finding
            failures.append(repr(e))
        done.append(1)


def test_hostile_connections_under_normal_traffic_leave_nothing_behind():
    soft, _ = raise_nofile_limit()
    needed = 2 * sum(Crowd.KINDS.values()) + 256
    if soft < needed:
        pytest.skip(f"RLIMIT_NOFILE is {soft}: {needed} descriptors needed")
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")],
                                limits={"header_timeout_ms": 2000, "body_idle_timeout_ms": 2000,
                                        "keepalive_timeout_ms": 120000, "linger_timeout_ms": 1000})
        with Gateway(config) as gw:
            for i in range(20):
                assert gw.json("POST", CHAT, chat_body(f"warm {i}", max_tokens=1))[0] == 200
            time.sleep(0.3)
            baseline_fds = fd_count(gw.pid) - upstream_sockets(gw.pid, sim.port)
            baseline_kib = rss_kib(gw.pid)

            crowd = Crowd(gw.port).start()
            failures: list = []
            done: list = []
            try:
                until = time.monotonic() + SOAK_SECONDS
                clients = [threading.Thread(target=normal_client, args=(gw, until, failures, done))
                           for _ in range(NORMAL_CLIENTS)]
                for t in clients:
                    t.start()
                for t in clients:
                    t.join(SOAK_SECONDS + 60)
                open_during = gw.admin("GET", "/admin/status")[2]["open_connections"]
                buffered_during = metric_sample(scrape(gw), "dpgate_buffered_body_bytes")
            finally:
                crowd.close()

            assert failures == [], f"{len(failures)} of {len(done)} normal requests failed: {failures[:5]}"
            assert len(done) >= 20, "normal traffic barely ran"
            assert crowd.errors == [], crowd.errors[:5]
            assert open_during >= sum(Crowd.KINDS.values()), "the crowd was not all held at once"
            assert buffered_during == SLOW_BODIES * 1048576, "each dribbled body holds its length of the budget"
            # The timeouts did their work meanwhile.
            assert crowd.cuts["silent"] >= SILENT and crowd.cuts["slow_head"] >= SLOW_HEADS
            assert crowd.cuts["slow_body"] == 0, "a body that keeps coming is not cut"

            # Nothing left behind once the crowd has gone.
            assert poll(lambda: gw.admin("GET", "/admin/status")[2]["open_connections"], lambda n: n == 0,
                        timeout=15) == 0
            assert poll(lambda: metric_sample(scrape(gw), "dpgate_buffered_body_bytes"), lambda v: v == 0) == 0
            for i in range(20):
                assert gw.json("POST", CHAT, chat_body(f"after {i}", max_tokens=1))[0] == 200
            # The upstream pool may keep what the normal clients' concurrency grew it to (it is
            # bounded by limits.upstream_max_idle_connections); everything else is as before.
            fds = poll(lambda: fd_count(gw.pid) - upstream_sockets(gw.pid, sim.port),
                       lambda n: n <= baseline_fds, timeout=10)
            assert fds <= baseline_fds, f"dpgate holds {fds} descriptors besides its upstream pool, {baseline_fds} before"
            if not is_sanitized(gw.pid):
                bound_kib = baseline_kib + 64 * 1024
                now_kib = poll(lambda: rss_kib(gw.pid), lambda kib: kib <= bound_kib, timeout=15)
                assert now_kib <= bound_kib, f"RSS {now_kib // 1024} MiB, {baseline_kib // 1024} MiB before the soak"
