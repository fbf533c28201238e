"""Every fault of the backend simulator, through dpgate, with real processes:
what the client gets (streamed and not), which metric counts it, and that
dpgate's file descriptors and memory come back afterwards.

The outcomes asserted here are the ones docs/FAULTS.md documents; change
both together. Timeouts are set small so that hangs end within seconds."""

from __future__ import annotations

import json
import re
import time

import pytest

from harness import (ADMIN_TOKEN, Gateway, Sim, chat_body, fd_count, gateway_config, http_request, is_sanitized,
                     open_stream, rss_kib, sse_events)

CHAT = "/v1/chat/completions"
FIRST_BYTE_TIMEOUT_MS = 1500
STREAM_IDLE_TIMEOUT_MS = 1000
# At most one idle pooled upstream connection per backend may differ from
# the baseline (dpgate retires them when next used, not on a timer).
FD_TOLERANCE = 2
RSS_TOLERANCE_KIB = 20 * 1024


def _limits() -> dict:
    return {"upstream_first_byte_timeout_ms": FIRST_BYTE_TIMEOUT_MS,
            "stream_idle_timeout_ms": STREAM_IDLE_TIMEOUT_MS,
            "upstream_connect_timeout_ms": 1000}


def _config(backends) -> dict:
    # One I/O thread: one upstream pool per backend, so the fd baseline is exact.
    return gateway_config(backends, threads=1, limits=_limits(), log={"access": "off"},
                          health={"interval_ms": 200, "timeout_ms": 400, "fall": 2, "rise": 1})


class Setup:
    def __init__(self, gw: Gateway, primary: Sim, standby: Sim | None):
        self.gw, self.primary, self.standby = gw, primary, standby
        self.fd_baseline = 0
        self.rss_baseline = 0

    def sims(self):
        return [s for s in (self.primary, self.standby) if s is not None]

    def settle(self) -> None:
        """Faults off, every backend back in service, some ordinary traffic:
        the state each scenario starts from and must return to."""
        for sim in self.sims():
            sim.set_fault("none")
        self.gw.wait_all_healthy(10)
        deadline = time.monotonic() + 10
        while True:  # failover mode: back on the primary once it is healthy again
            status, headers, _ = self.gw.request("POST", CHAT, chat_body("settle", max_tokens=1))
            if status == 200 and headers["x-dpgate-route"].startswith("primary/"):
                break
            assert time.monotonic() < deadline, f"traffic never returned to the primary: {status} {headers}"
            time.sleep(0.1)
        for i in range(5):
            assert self.gw.request("POST", CHAT, chat_body(f"settle {i}", max_tokens=2))[0] == 200
            assert sse_events(self.gw.port, CHAT, chat_body(f"settle {i}", stream=True, max_tokens=2),
                              headers=AUTH)[0] == 200

    def steady_fds(self) -> int:
        # Health probes open and close connections all the time: the least
        # over half a second is what dpgate holds at rest.
        counts = []
        for _ in range(10):
            counts.append(fd_count(self.gw.pid))
            time.sleep(0.05)
        return min(counts)

    def record_baseline(self) -> None:
        self.settle()
        time.sleep(0.3)
        self.fd_baseline = self.steady_fds()
        self.rss_baseline = rss_kib(self.gw.pid)

    def assert_back_to_baseline(self) -> None:
        assert self.gw.process.alive(), "dpgate died:\n" + self.gw.process.describe()
        self.settle()
        deadline = time.monotonic() + 5
        while (fds := self.steady_fds()) > self.fd_baseline + FD_TOLERANCE and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fds <= self.fd_baseline + FD_TOLERANCE, f"dpgate holds {fds} fds; {self.fd_baseline} before the fault"
        if not is_sanitized(self.gw.pid):  # ASan's quarantine keeps freed memory on purpose
            rss = rss_kib(self.gw.pid)
            assert rss <= self.rss_baseline + RSS_TOLERANCE_KIB, \
                f"dpgate RSS {rss} KiB; {self.rss_baseline} KiB before the fault"


AUTH = {"Authorization": "Bearer sk-dpgate-local"}


@pytest.fixture(scope="module")
def pair():
    """Primary and standby (failover mode); faults are injected into the primary."""
    with Sim(decode_us_per_token=20_000, max_output=8) as primary, Sim(decode_us_per_token=20_000, max_output=8) as standby:
        with Gateway(_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            setup = Setup(gw, primary, standby)
            setup.record_baseline()
            yield setup


@pytest.fixture(scope="module")
def single():
    """One backend: nothing to fail over to."""
    with Sim(decode_us_per_token=20_000, max_output=8) as primary:
        with Gateway(_config([("primary", primary, "primary")])) as gw:
            setup = Setup(gw, primary, None)
            setup.record_baseline()
            yield setup


@pytest.fixture
def on_pair(pair):
    yield pair
    pair.assert_back_to_baseline()


@pytest.fixture
def on_single(single):
    yield single
    single.assert_back_to_baseline()


def metrics(gw: Gateway) -> dict[str, float]:
    status, _, body = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def metric(gw: Gateway, name: str, **labels) -> float:
    """The sum of a family's samples whose labels include `labels`."""
    total = 0.0
    for key, value in metrics(gw).items():
        family, _, rest = key.partition("{")
        if family != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if all(have.get(k) == v for k, v in labels.items()):
            total += value
    return total


def wait_metric(gw: Gateway, name: str, at_least: float, timeout: float = 3.0, **labels) -> float:
    # A relay records its request after the client has the answer.
    deadline = time.monotonic() + timeout
    while (value := metric(gw, name, **labels)) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def openai_error(body: bytes) -> dict:
    """The `error` object of an OpenAI-shaped error body (asserts the shape)."""
    doc = json.loads(body)
    assert isinstance(doc, dict) and isinstance(doc.get("error"), dict), f"not an OpenAI error: {body[:300]!r}"
    error = doc["error"]
    assert {"message", "type", "param", "code"} <= error.keys(), error
    return error


def stream_body(text: str, **extra) -> dict:
    return chat_body(text, stream=True, max_tokens=6, stream_options={"include_usage": True}, **extra)


def wait_backend_up(gw: Gateway, name: str, up: bool, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while metric(gw, "dpgate_backend_up", backend=name) != (1.0 if up else 0.0):
        assert time.monotonic() < deadline, f"backend {name} never became {'up' if up else 'down'}"
        time.sleep(0.05)


# --------------------------------------------------------------------------
# refuse: the backend accepts connections and closes them without a byte.


def test_refuse_is_retried_on_the_standby(on_pair):
    s = on_pair
    retries = metric(s.gw, "dpgate_upstream_retries_total")
    s.primary.set_fault("refuse")
    status, headers, body = s.gw.request("POST", CHAT, chat_body("refused", max_tokens=2))
    assert status == 200, body
    assert headers["x-dpgate-route"].startswith("standby/")
    assert wait_metric(s.gw, "dpgate_upstream_retries_total", retries + 1) == retries + 1
    status, headers, events, complete = sse_events(s.gw.port, CHAT, stream_body("refused stream"), headers=AUTH)
    assert status == 200 and complete and events[-1].data == "[DONE]"
    assert headers["x-dpgate-route"].startswith("standby/")
    wait_backend_up(s.gw, "primary", False)


def test_refuse_without_a_standby_is_502_then_503(on_single):
    s = on_single
    s.primary.set_fault("refuse")
    status, _, body = s.gw.request("POST", CHAT, chat_body("refused", max_tokens=2))
    assert status == 502, body
    error = openai_error(body)
    assert error["code"] == "backend_unreachable" and "primary" in error["message"]
    wait_backend_up(s.gw, "primary", False)
    for request_body in (chat_body("refused again", max_tokens=2), stream_body("refused stream")):
        status, _, body = s.gw.request("POST", CHAT, request_body)
        assert status == 503, body
        assert openai_error(body)["code"] == "backend_unavailable"


# --------------------------------------------------------------------------
# status: every /v1/* request is answered with an error status.


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_status_500_is_relayed_not_retried(on_pair, stream):
    s = on_pair
    retries = metric(s.gw, "dpgate_upstream_retries_total")
    answered = metric(s.gw, "dpgate_requests_total", code="500")
    s.primary.set_fault("status", status=500)
    request_body = stream_body("five hundred") if stream else chat_body("five hundred", max_tokens=2)
    status, headers, body = s.gw.request("POST", CHAT, request_body)
    assert status == 500
    assert headers["x-dpgate-route"].startswith("primary/")
    assert headers["content-type"].startswith("application/json")
    # The backend's own message, in OpenAI's error shape.
    assert openai_error(body)["message"] == "Simulated fault: status 500."
    assert metric(s.gw, "dpgate_upstream_retries_total") == retries
    assert wait_metric(s.gw, "dpgate_requests_total", answered + 1, code="500") == answered + 1


def test_status_500_reaches_the_client_in_openai_error_shape(on_pair):
    s = on_pair
    s.primary.set_fault("status", status=500)
    status, _, body = s.gw.request("POST", CHAT, chat_body("five hundred", max_tokens=2))
    assert status == 500
    openai_error(body)


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_status_503_is_retried_on_the_standby(on_pair, stream):
    s = on_pair
    retries = metric(s.gw, "dpgate_upstream_retries_total")
    s.primary.set_fault("status", status=503)
    if stream:
        status, headers, events, complete = sse_events(s.gw.port, CHAT, stream_body("overloaded"), headers=AUTH)
        assert complete and events[-1].data == "[DONE]"
    else:
        status, headers, body = s.gw.request("POST", CHAT, chat_body("overloaded", max_tokens=2))
    assert status == 200
    assert headers["x-dpgate-route"].startswith("standby/")
    assert wait_metric(s.gw, "dpgate_upstream_retries_total", retries + 1) == retries + 1


def test_status_503_without_a_standby_is_relayed(on_single):
    s = on_single
    s.primary.set_fault("status", status=503)
    status, headers, body = s.gw.request("POST", CHAT, chat_body("overloaded", max_tokens=2))
    assert status == 503
    assert headers["x-dpgate-route"].startswith("primary/")
    assert openai_error(body)["message"] == "Simulated fault: status 503."


# --------------------------------------------------------------------------
# hang: the backend reads the request and never answers.


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_hang_is_504_at_the_first_byte_deadline(on_pair, stream):
    s = on_pair
    answered = metric(s.gw, "dpgate_requests_total", code="504")
    s.primary.set_fault("hang")
    start = time.monotonic()
    request_body = stream_body("hang") if stream else chat_body("hang", max_tokens=2)
    status, _, body = s.gw.request("POST", CHAT, request_body, timeout=15)
    elapsed = time.monotonic() - start
    if status == 503:
        pytest.fail("the health checker took the hanging primary out before the request was routed; "
                    "the first-byte deadline was not exercised")
    assert status == 504, body
    error = openai_error(body)
    assert error["code"] == "backend_timeout" and "primary" in error["message"]
    assert FIRST_BYTE_TIMEOUT_MS / 1000 - 0.1 <= elapsed <= FIRST_BYTE_TIMEOUT_MS / 1000 + 1.5, elapsed
    assert wait_metric(s.gw, "dpgate_requests_total", answered + 1, code="504") == answered + 1
    # The health checker notices too, and later requests go to the standby.
    wait_backend_up(s.gw, "primary", False)
    status, headers, _ = s.gw.request("POST", CHAT, chat_body("after the hang", max_tokens=2))
    assert status == 200 and headers["x-dpgate-route"].startswith("standby/")


def test_hang_without_a_standby_is_504_then_503(on_single):
    s = on_single
    s.primary.set_fault("hang")
    status, _, body = s.gw.request("POST", CHAT, chat_body("hang", max_tokens=2), timeout=15)
    assert status in (503, 504), body
    assert openai_error(body)["code"] in ("backend_timeout", "backend_unavailable")
    wait_backend_up(s.gw, "primary", False)
    status, _, body = s.gw.request("POST", CHAT, stream_body("hang stream"), timeout=15)
    assert status == 503 and openai_error(body)["code"] == "backend_unavailable"


# --------------------------------------------------------------------------
# cut_stream: the backend closes the connection after N events of a stream.


def test_cut_stream_ends_in_an_error_event_and_a_broken_body(on_pair):
    s = on_pair
    aborts = metric(s.gw, "dpgate_stream_aborts_total", side="upstream")
    s.primary.set_fault("cut_stream", after_chunks=3)
    status, headers, events, complete = sse_events(s.gw.port, CHAT, stream_body("cut"), headers=AUTH)
    assert status == 200 and headers["x-dpgate-route"].startswith("primary/")
    assert not complete, "a broken stream must not end like a clean one"
    assert len(events) == 4 and all(e.data != "[DONE]" for e in events), events
    error = events[-1].json()["error"]
    assert error["code"] == "stream_interrupted" and error["type"] == "upstream_error"
    assert wait_metric(s.gw, "dpgate_stream_aborts_total", aborts + 1, side="upstream") == aborts + 1
    # Not retried after the first byte, and the backend stays in service.
    status, headers, body = s.gw.request("POST", CHAT, chat_body("not a stream", max_tokens=3))
    assert status == 200 and headers["x-dpgate-route"].startswith("primary/"), body
    assert json.loads(body)["usage"]["completion_tokens"] == 3


def test_cut_stream_before_the_first_event_is_still_an_error_event(on_pair):
    s = on_pair
    s.primary.set_fault("cut_stream", after_chunks=0)
    status, _, events, complete = sse_events(s.gw.port, CHAT, stream_body("cut at once"), headers=AUTH)
    # The backend's 200 header was relayed at once (event streams are), so
    # the failure can only be told in the body.
    assert status == 200 and not complete
    assert [e.json()["error"]["code"] for e in events] == ["stream_interrupted"]


# --------------------------------------------------------------------------
# slow: extra delay between tokens.


def test_slow_chunks_within_the_deadlines_are_relayed_whole(on_pair):
    s = on_pair
    s.primary.set_fault("slow", chunk_delay_ms=200)
    start = time.monotonic()
    status, _, events, complete = sse_events(s.gw.port, CHAT, stream_body("slow"), headers=AUTH)
    assert status == 200 and complete and events[-1].data == "[DONE]"
    assert time.monotonic() - start >= 5 * 0.2
    # One late event shortens the gap after it, so the spread of the events
    # and the median gap are judged; a proxy that buffered the answer would
    # deliver them all at once (gaps near 0).
    gaps = [b.at - a.at for a, b in zip(events[1:], events[2:-2])]
    assert sorted(gaps)[len(gaps) // 2] >= 0.15, f"events were not relayed as they came: {gaps}"
    assert events[-3].at - events[1].at >= 0.9 * 0.2 * len(gaps), f"events were not relayed as they came: {gaps}"
    status, _, body = s.gw.request("POST", CHAT, chat_body("slow", max_tokens=4))
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 4


def test_slow_chunks_beyond_the_stream_idle_deadline_end_in_an_error_event(on_pair):
    s = on_pair
    aborts = metric(s.gw, "dpgate_stream_aborts_total", side="upstream")
    s.primary.set_fault("slow", chunk_delay_ms=STREAM_IDLE_TIMEOUT_MS + 800)
    status, _, events, complete = sse_events(s.gw.port, CHAT, stream_body("too slow"), headers=AUTH, timeout=15)
    assert status == 200 and not complete
    error = events[-1].json()["error"]
    assert error["code"] == "stream_interrupted"
    assert f"no data for {STREAM_IDLE_TIMEOUT_MS} ms" in error["message"]
    assert wait_metric(s.gw, "dpgate_stream_aborts_total", aborts + 1, side="upstream") == aborts + 1


def test_slow_non_stream_answer_beyond_the_first_byte_deadline_is_504(on_pair):
    s = on_pair
    s.primary.set_fault("slow", chunk_delay_ms=1000)  # 4 tokens: the answer comes after ~3 s
    status, _, body = s.gw.request("POST", CHAT, chat_body("slow", max_tokens=4), timeout=15)
    assert status == 504, body
    assert openai_error(body)["code"] == "backend_timeout"


# --------------------------------------------------------------------------
# unhealthy: /health answers 503, the API still works.


@pytest.mark.parametrize("stream", [False, True], ids=["non_stream", "stream"])
def test_unhealthy_primary_fails_over_to_the_standby(on_pair, stream):
    s = on_pair
    s.primary.set_fault("unhealthy")
    wait_backend_up(s.gw, "primary", False)
    if stream:
        status, headers, events, complete = sse_events(s.gw.port, CHAT, stream_body("unhealthy"), headers=AUTH)
        assert complete and events[-1].data == "[DONE]"
    else:
        status, headers, _ = s.gw.request("POST", CHAT, chat_body("unhealthy", max_tokens=2))
    assert status == 200 and headers["x-dpgate-route"].startswith("standby/")


def test_unhealthy_without_a_standby_is_503(on_single):
    s = on_single
    s.primary.set_fault("unhealthy")
    wait_backend_up(s.gw, "primary", False)
    for request_body in (chat_body("unhealthy", max_tokens=2), stream_body("unhealthy stream")):
        status, _, body = s.gw.request("POST", CHAT, request_body)
        assert status == 503, body
        error = openai_error(body)
        assert error["code"] == "backend_unavailable" and error["type"] == "upstream_error"
    status, _, body = http_request(s.gw.port, "GET", "/health")
    assert status == 503


# --------------------------------------------------------------------------
# Faults while streams are in flight: the descriptors of many broken
# streams come back too.


def test_many_streams_cut_at_once_leave_no_descriptors(on_pair):
    import threading
    s = on_pair
    s.primary.set_fault("cut_stream", after_chunks=2)
    outcomes = []

    def one(i):
        try:
            _, _, events, complete = sse_events(s.gw.port, CHAT, stream_body(f"cut {i}"), headers=AUTH)
            outcomes.append((complete, events[-1].data if events else ""))
        except OSError as e:
            outcomes.append((None, repr(e)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(outcomes) == 50
    assert all(complete is False and "stream_interrupted" in last for complete, last in outcomes), outcomes[:3]


def test_client_aborts_mid_stream_leave_no_descriptors(on_pair):
    s = on_pair
    aborts = metric(s.gw, "dpgate_stream_aborts_total", side="client")
    cancelled = s.primary.stats()["cancelled"]
    s.primary.set_fault("slow", chunk_delay_ms=300)
    for i in range(20):
        with open_stream(s.gw.port, CHAT, stream_body(f"abort {i}"), headers=AUTH) as resp:
            assert resp.status == 200
            next(resp.events())  # then hang up mid-stream
    # dpgate hangs up on the backend too, which stops generating.
    deadline = time.monotonic() + 5
    while (stats := s.primary.stats())["cancelled"] < cancelled + 20 or stats["in_flight"]:
        assert time.monotonic() < deadline, f"the backend still generates for gone clients: {stats['in_flight']}"
        time.sleep(0.05)
    assert wait_metric(s.gw, "dpgate_stream_aborts_total", aborts + 20, side="client") == aborts + 20


def test_a_backend_that_closes_right_after_an_event_is_seen_long_before_the_idle_deadline():
    """A stream's body is read drain-aware (drain_aware_read.hpp): after the
    short read that takes an event, the next read waits for epoll instead of
    trying recv() first. A backend that closes right after an event, its end
    of stream in the event's own segment (close_with_event), raises no event
    after the read that took the bytes. The sweep re-arms a read that has
    waited a second, and the end is seen then, not at the stream's idle
    deadline (30 s here), and as the end of the stream, not as a timeout."""
    limits = dict(_limits(), stream_idle_timeout_ms=30_000)
    with Sim(decode_us_per_token=20_000, max_output=8) as sim:
        config = gateway_config([("primary", sim, "primary")], threads=1, limits=limits, log={"access": "off"})
        with Gateway(config) as gw:
            sim.set_fault("cut_stream", after_chunks=3, close_with_event=True)
            for i in range(3):
                start = time.monotonic()
                status, _, events, complete = sse_events(gw.port, CHAT, stream_body(f"cut {i}"), headers=AUTH)
                took = time.monotonic() - start
                assert status == 200 and not complete
                error = events[-1].json()["error"]
                assert error["code"] == "stream_interrupted", error
                assert "no data for" not in error["message"], error
                assert took < 10, f"stream {i}: the end was seen after {took:.1f} s"


def test_a_pooled_connection_the_backend_closed_while_idle_is_sent_again_at_once():
    """A backend closes keep-alive connections that sat idle (vLLM's server
    after 5 s; dpgate retires its own at 4 s, but one closed sooner stays in
    the pool). The refuse fault closes every idle one at once. The next
    request's first read waits for an event without trying recv() first
    (TimedSocket::waitBeforeNextRead): the reset the closed connection sends
    back must wake it, and the request goes out again on a fresh connection,
    long before the first-byte deadline."""
    with Sim() as sim, Gateway(_config([("primary", sim, "primary")])) as gw:
        status, _, body = gw.request("POST", CHAT, chat_body("first turn", max_tokens=1))
        assert status == 200, body
        for _ in range(3):
            sim.set_fault("refuse")  # closes the connection dpgate pooled
            sim.set_fault("none")
            time.sleep(0.5)  # the close arrives; dpgate's event loop takes in its event
            start = time.monotonic()
            status, _, body = gw.request("POST", CHAT, chat_body("next turn", max_tokens=1))
            took = time.monotonic() - start
            assert status == 200, body
            assert took < FIRST_BYTE_TIMEOUT_MS / 1000 / 2, f"the resend waited {took:.2f} s"
