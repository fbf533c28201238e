"""Budgets per key through a real dpgate, dpgate-sim and redis-server: what
a key reserves (its exact prompt + the output budget), what comes back when
the answer ends (the backend's usage), the answers clients act on (429 with
Retry-After and x-ratelimit-*, 400 budget_exceeded for a request no window
holds), days that survive a restart, and one budget shared by two replicas
through Redis, with Redis killed and brought back mid-run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness import (ADMIN_TOKEN, EXACT_SIM_COUNTS, Gateway, Sim, bin_dir, chat_body, free_port, gateway_config, http_json,
                     http_request, metric_sample, open_stream, wait_for_port)

CHAT = "/v1/chat/completions"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MAX_TOKENS = 300
COMPLETION = 20  # the sim's answers (--max-output)


class RedisServer:
    """A redis-server on a loopback port of its own, nothing persisted."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="dpgate-redis-"))
        self.start()

    def start(self) -> None:
        self._log = open(self._dir / "redis.log", "ab")
        self.process = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self._dir)], stdout=self._log, stderr=self._log)
        wait_for_port(self.port)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._log.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.kill()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "RedisServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def key(name: str, **budgets) -> dict:
    return {"name": name, "key": f"sk-{name}", **budgets}


def post(gw: Gateway, name: str, body=None, headers=None):
    body = body or chat_body("Hello!", max_tokens=MAX_TOKENS)
    return http_json(gw.port, "POST", CHAT, body, {"Authorization": f"Bearer sk-{name}", **(headers or {})})


def metrics(gw: Gateway) -> str:
    status, _, raw = http_request(gw.admin_port, "GET", "/metrics", ADMIN)
    assert status == 200
    return raw.decode()


def reserved(headers) -> int:
    return int(headers["x-ratelimit-limit-tokens"]) - int(headers["x-ratelimit-remaining-tokens"])


def test_a_key_reserves_exactly_and_gets_the_unused_output_back():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                auth={"required": True, "keys": [key("alice", tokens_per_min=1000,
                                                                     requests_per_min=100)]})
        with Gateway(config) as gw:
            status, headers, body = post(gw, "alice")
            assert status == 200, body
            prompt = body["usage"]["prompt_tokens"]
            # Reserved: the exact prompt and the whole output budget; the
            # bucket refills 1000 a minute meanwhile (at most a few tokens).
            assert headers["x-ratelimit-limit-tokens"] == "1000"
            assert 0 <= reserved(headers) - (prompt + MAX_TOKENS) <= 0
            assert headers["x-ratelimit-limit-requests"] == "100"
            assert headers["x-ratelimit-remaining-requests"] == "99"
            assert headers["x-ratelimit-reset-tokens"].endswith("s")
            # The answer used prompt + 20 of prompt + 300: 280 came back
            # before the next request (same connection order).
            status, headers, _ = post(gw, "alice")
            assert status == 200
            used_before = prompt + COMPLETION
            assert reserved(headers) <= used_before + prompt + MAX_TOKENS
            assert reserved(headers) >= used_before + prompt + MAX_TOKENS - 5  # refill during the test

            page = metrics(gw)
            assert metric_sample(page, "dpgate_key_tokens_total", key="alice", kind="completion") == 2 * COMPLETION
            assert metric_sample(page, "dpgate_key_tokens_total", key="alice", kind="prompt") == 2 * prompt
            assert metric_sample(page, "dpgate_key_tokens_total", key="alice",
                                 kind="reserved_unused") == 2 * (MAX_TOKENS - COMPLETION)
            assert metric_sample(page, "dpgate_key_requests_total", key="alice", status="200") == 2


def test_over_budget_is_429_with_the_wait_and_never_fitting_is_400():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                auth={"required": True, "keys": [key("bob", tokens_per_min=700)]})
        with Gateway(config) as gw:
            assert post(gw, "bob")[0] == 200
            assert post(gw, "bob")[0] == 200
            # Two answers used ~50 of 700 (the rest of each reservation came
            # back): 660 + prompt fits only after a refill.
            status, headers, body = post(gw, "bob", chat_body("Hello!", max_tokens=660))
            assert status == 429, body
            assert body["error"]["code"] == "rate_limit_exceeded"
            assert "tokens per minute" in body["error"]["message"]
            wait_ms = int(headers["retry-after-ms"])
            assert 0 < wait_ms <= 60_000
            assert int(headers["retry-after"]) == (wait_ms + 999) // 1000
            assert headers["x-ratelimit-limit-tokens"] == "700"
            assert "x-should-retry" not in headers  # a minute's wait: SDKs retry after it
            # Nothing was charged by the refusal: the same wait, or less.
            again = post(gw, "bob", chat_body("Hello!", max_tokens=660))
            assert again[0] == 429 and int(again[1]["retry-after-ms"]) <= wait_ms

            # Larger than a whole minute of the budget: never, whatever the wait.
            status, headers, body = post(gw, "bob", chat_body("Hello!", max_tokens=701))
            assert status == 400 and body["error"]["code"] == "budget_exceeded"
            assert headers["x-should-retry"] == "false"
            assert "tokens_per_min: 700" in body["error"]["message"]
            # No max_tokens: the default output budget (32,768) is reserved.
            status, _, body = post(gw, "bob", chat_body("Hello!"))
            assert status == 400 and "32,7" in body["error"]["message"]

            page = metrics(gw)
            assert metric_sample(page, "dpgate_key_rate_limited_total", key="bob", limit="tokens_per_min") == 2
            assert metric_sample(page, "dpgate_key_rate_limited_total", key="bob", limit="never_fits") == 2
            assert metric_sample(page, "dpgate_key_requests_total", key="bob", status="429") == 2
            assert sim.stats()["requests"] == 2  # no refusal reached the backend


def test_requests_per_day_refuse_from_the_head_and_tell_sdks_not_to_wait():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                auth={"required": True, "keys": [key("carol", requests_per_day=2)]})
        with Gateway(config) as gw:
            assert [post(gw, "carol")[0] for _ in range(2)] == [200, 200]
            status, headers, body = post(gw, "carol")
            assert status == 429 and "requests per day" in body["error"]["message"]
            assert headers["x-should-retry"] == "false"  # until midnight UTC: hours, not a retry
            assert headers["x-ratelimit-remaining-requests"] == "0"
            # Refused before the body was read: a body too large for the
            # limits is not even looked at.
            status, _, _ = post(gw, "carol", {"model": "x", "messages": "not even a list"})
            assert status == 429


def test_a_stream_is_settled_from_the_usage_dpgate_asked_for():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")], metrics={"stream_usage": False},
                                auth={"required": True, "keys": [key("dan", tokens_per_min=100_000)]})
        with Gateway(config) as gw:
            body = chat_body("Hello!", max_tokens=MAX_TOKENS, stream=True)
            with open_stream(gw.port, CHAT, body, {"Authorization": "Bearer sk-dan"}) as resp:
                assert resp.status == 200
                first = int(resp.headers["x-ratelimit-remaining-tokens"])
                events = [e.data for e in resp.events()]
            # The client did not ask for usage and sees none ...
            assert not any('"usage":{' in e for e in events if e != "[DONE]")
            # ... but dpgate asked for it, so the unused output came back.
            page = metrics(gw)
            assert metric_sample(page, "dpgate_key_tokens_total", key="dan", kind="completion") == COMPLETION
            assert metric_sample(page, "dpgate_key_tokens_total", key="dan",
                                 kind="reserved_unused") == MAX_TOKENS - COMPLETION
            status, headers, _ = post(gw, "dan")
            assert status == 200 and int(headers["x-ratelimit-remaining-tokens"]) > first - MAX_TOKENS - 10


def test_a_cut_stream_is_charged_what_it_reserved():
    with Sim(max_output=COMPLETION, decode_us_per_token=20_000, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                auth={"required": True, "keys": [key("erin", tokens_per_min=100_000)]})
        with Gateway(config) as gw:
            sim.set_fault("cut_stream", after_chunks=3)
            body = chat_body("Hello!", max_tokens=MAX_TOKENS, stream=True)
            with open_stream(gw.port, CHAT, body, {"Authorization": "Bearer sk-erin"}) as resp:
                list(resp.events())
            sim.set_fault("none")
            page = metrics(gw)
            assert metric_sample(page, "dpgate_key_tokens_total", key="erin", kind="reserved_unused") == 0
            assert metric_sample(page, "dpgate_key_tokens_total", key="erin", kind="completion") == 0


def test_a_day_survives_a_restart(tmp_path):
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")], state={"dir": str(tmp_path)},
                                auth={"required": True, "keys": [key("fay", tokens_per_day=5000)]})
        with Gateway(config) as gw:
            for _ in range(3):
                status, headers, _ = post(gw, "fay")
                assert status == 200
            assert headers["x-ratelimit-limit-tokens"] == "5000"
            used = 5000 - int(headers["x-ratelimit-remaining-tokens"])  # two settled, the third reserved
        assert (tmp_path / "budget_days.json").exists()
        with Gateway(config) as gw:
            status, headers, body = post(gw, "fay")
            assert status == 200
            prompt = body["usage"]["prompt_tokens"]
            # Three requests settled before the restart, this one reserved.
            expected = 3 * (prompt + COMPLETION) + prompt + MAX_TOKENS
            assert 5000 - int(headers["x-ratelimit-remaining-tokens"]) == expected
            assert expected > used


def test_ctl_usage_lists_the_keys_that_used_most_first():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                auth={"required": True, "keys": [key("light", tokens_per_min=50_000),
                                                                 key("heavy")]})
        with Gateway(config) as gw:
            post(gw, "light")
            for _ in range(3):
                post(gw, "heavy")
            run = subprocess.run([str(bin_dir() / "dpgate"), "ctl", "--admin", f"http://127.0.0.1:{gw.admin_port}",
                                  "usage"], capture_output=True, text=True, timeout=30,
                                 env={**os.environ, "DPGATE_ADMIN_TOKEN": ADMIN_TOKEN})
            assert run.returncode == 0, run.stderr
            rows = [line.split() for line in run.stdout.splitlines() if line.startswith(("heavy", "light"))]
            assert [r[0] for r in rows] == ["heavy", "light"]
            assert rows[0][4] == "3" and rows[1][4] == "1"  # requests today
            assert rows[1][6] == "50000" and rows[0][6] == "-"  # tokens per minute
            status, _, body = gw.admin("GET", "/admin/status")
            assert [k["key"] for k in body["top_keys"]][:2] == ["heavy", "light"]
            assert body["budgets"]["store"] == "local"


def test_a_reload_changes_the_budgets_and_keeps_what_was_used():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim:
        config = gateway_config([("primary", sim, "primary")],
                                auth={"required": True, "keys": [key("gil", tokens_per_day=10_000)]})
        with Gateway(config) as gw:
            status, headers, _ = post(gw, "gil")
            assert status == 200 and headers["x-ratelimit-limit-tokens"] == "10000"
            config["auth"]["keys"] = [key("gil", tokens_per_day=2_000, requests_per_min=50), key("new", tokens_per_min=900)]
            gw.config_path.write_text(json.dumps(config))
            assert gw.admin("POST", "/admin/reload")[0] == 200
            status, headers, body = post(gw, "gil")
            assert status == 200, body
            prompt = body["usage"]["prompt_tokens"]
            assert headers["x-ratelimit-limit-tokens"] == "2000"
            # Today's use carried over: one settled answer, this reservation.
            assert int(headers["x-ratelimit-remaining-tokens"]) == 2000 - (prompt + COMPLETION) - (prompt + MAX_TOKENS)
            assert headers["x-ratelimit-limit-requests"] == "50"
            status, headers, _ = post(gw, "new")
            assert status == 200 and headers["x-ratelimit-limit-tokens"] == "900"


def shared_config(sim: Sim, redis: RedisServer, keys: list[dict], **limits) -> dict:
    return gateway_config([("primary", sim, "primary")],
                          limits={"redis": {"address": f"127.0.0.1:{redis.port}", "key_prefix": "t:"}, **limits},
                          auth={"required": True, "keys": keys})


def status_of(gw: Gateway) -> dict:
    return gw.admin("GET", "/admin/status")[2]["budgets"]


def wait_store(gw: Gateway, reachable: bool, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while status_of(gw).get("reachable") != reachable:
        assert time.monotonic() < deadline, status_of(gw)
        time.sleep(0.05)


def test_two_replicas_share_one_budget_through_redis():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim, RedisServer() as redis:
        keys = [key("team", tokens_per_min=1000, requests_per_min=1000), key("rpm", requests_per_min=4)]
        with Gateway(shared_config(sim, redis, keys)) as a, Gateway(shared_config(sim, redis, keys)) as b:
            wait_store(a, True)
            wait_store(b, True)
            # a's three answers use 3 x (prompt + 20) of one budget of 1000
            # (each reserved prompt + 300 and gave the rest back) ...
            for _ in range(3):
                status, _, body = post(a, "team")
                assert status == 200, body
            prompt = body["usage"]["prompt_tokens"]
            used = 3 * (prompt + COMPLETION)
            # ... and b sees them: its own reservation leaves what a left.
            status, headers, _ = post(b, "team")
            assert status == 200
            left = int(headers["x-ratelimit-remaining-tokens"])
            assert 1000 - used - (prompt + MAX_TOKENS) <= left <= 1000 - used - (prompt + MAX_TOKENS) + 5
            used += prompt + COMPLETION
            # A request that fits one replica's own budget but not what the
            # two left together is refused.
            big = 1000 - used - prompt + 10
            status, headers, body = post(b, "team", chat_body("Hello!", max_tokens=big))
            assert status == 429, body
            # requests_per_min holds across the replicas: 4 in all.
            codes = [post(gw, "rpm")[0] for gw in (a, b, a, b, a, b)]
            assert codes == [200, 200, 200, 200, 429, 429]
            page = metrics(a)
            assert metric_sample(page, "dpgate_budget_local_decisions_total") == 0


def test_redis_killed_mid_run_then_back():
    with Sim(max_output=COMPLETION, extra_args=EXACT_SIM_COUNTS) as sim, RedisServer() as redis:
        keys = [key("team", tokens_per_min=100_000, requests_per_min=6)]
        with Gateway(shared_config(sim, redis, keys, on_store_unavailable="local")) as a, \
                Gateway(shared_config(sim, redis, keys, on_store_unavailable="deny")) as b:
            wait_store(a, True)
            assert post(a, "team")[0] == 200
            assert post(b, "team")[0] == 200
            redis.kill()
            wait_store(a, False)
            wait_store(b, False)
            # local: the replica goes on with its own share (no control
            # store lists replicas here: the whole budget, 6 a minute, of
            # which it used 1 while Redis was up) ...
            codes = [post(a, "team")[0] for _ in range(7)]
            assert codes == [200] * 5 + [429] * 2, codes
            # ... deny: budgeted keys get 503 while the store is away.
            status, headers, body = post(b, "team")
            assert status == 503 and body["error"]["code"] == "budget_store_unavailable"
            assert headers["retry-after"] == "1"
            assert status_of(a)["reachable"] is False and status_of(a)["local_share"] == 1
            page = metrics(a)
            # Five reservations decided alone; the two refusals came from the
            # head, out of the replica's own request bucket.
            assert metric_sample(page, "dpgate_budget_local_decisions_total") == 5
            # Redis back (empty: what was used while it was away stays local).
            redis.start()
            wait_store(a, True)
            wait_store(b, True)
            assert post(b, "team")[0] == 200
            codes = [post(gw, "team")[0] for gw in (a, b, a, b, a, b)]
            assert codes == [200] * 5 + [429], codes


def test_check_describes_the_budgets(tmp_path):
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")],
                                limits={"key_defaults": {"tokens_per_min": 20_000}},
                                auth={"required": True, "keys": [key("small"), key("big", tokens_per_min=2_000_000)]})
        path = tmp_path / "dpgate.yaml"
        path.write_text(json.dumps(config))
        run = subprocess.run([str(bin_dir() / "dpgate"), "check", "--config", str(path)], capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        out = run.stdout
        assert "budgets: in this process" in out
        # A minute smaller than the default output budget: every request
        # without max_tokens would be refused; check says so.
        assert "key small: tokens_per_min 20000" in out and "32768" in out and "max_tokens" in out
        assert "key big" not in out and "2 of 2 keys have budgets" in out
