"""Start-up without false alarms: a backend nobody has probed yet, or that
is not listening yet because the gateway came up first, is "unknown", not
down. Only a real verdict logs "is down", moves the down metric or fails
over; and a record `dpgate accept` writes shows in the next status."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from harness import (ADMIN_TOKEN, EXACT_SIM_COUNTS, MODEL, Gateway, Sim, bin_dir, chat_body, free_port,
                     gateway_config, http_json, http_request)


@dataclass
class NotYetStarted:
    """Where a simulator will listen: gateway_config() needs only its url and ranks."""
    port: int
    dp: int = 8

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def status(gw: Gateway) -> dict:
    code, _, body = gw.admin("GET", "/admin/status")
    assert code == 200, body
    return body


def wait_status(gw: Gateway, predicate, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = status(gw)
        if predicate(body):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


def health(body: dict) -> dict[str, str]:
    return {b["name"]: b["health"] for b in body["backends"]}


def log_text(gw: Gateway) -> str:
    return gw.process.stdout() + gw.process.stderr()


def alarms(gw: Gateway) -> list[str]:
    """The log's warning and error lines."""
    return [line for line in log_text(gw).splitlines() if " dpgate warn: " in line or " dpgate error: " in line]


def backend_up_lines(gw: Gateway) -> list[str]:
    code, _, page = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert code == 200
    return [line for line in page.decode().splitlines() if line.startswith("dpgate_backend_up{")]


def ctl_status(gw: Gateway) -> str:
    run = subprocess.run([str(bin_dir() / "dpgate"), "ctl", "--admin", f"http://127.0.0.1:{gw.admin_port}", "status"],
                         env={**os.environ, "DPGATE_ADMIN_TOKEN": ADMIN_TOKEN}, capture_output=True, text=True,
                         timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_a_gateway_started_before_its_backends_raises_no_alarm():
    primary_at, standby_at = NotYetStarted(free_port()), NotYetStarted(free_port())
    # Up to 20 refused probes (5 s) before a backend that is not listening is down.
    config = gateway_config([("primary", primary_at, "primary"), ("standby", standby_at, "standby")],
                            health={"interval_ms": 250, "timeout_ms": 1000, "fall": 20, "rise": 2})
    with Gateway(config, wait_healthy=False) as gw:
        body = status(gw)
        assert health(body) == {"primary": "unknown", "standby": "unknown"}, body
        for b in body["backends"]:
            assert b["healthy"] is False and b["probed"] is False, b
        assert http_json(gw.port, "GET", "/health")[0] == 503
        assert backend_up_lines(gw) == [], "an unknown backend must not read as down"
        assert "not probed yet (unknown)" in ctl_status(gw)
        # The standby comes up first: the primary is still unknown, not down,
        # so nothing fails over to the unaccepted standby.
        with Sim(port=standby_at.port, extra_args=EXACT_SIM_COUNTS) as standby:
            body = wait_status(gw, lambda b: health(b)["standby"] == "healthy")
            assert health(body)["primary"] == "unknown", body
            assert body["failover_unaccepted"] is None, body
            code, _, answer = gw.json("POST", "/v1/chat/completions", chat_body(max_tokens=1))
            assert code == 503, answer
            assert standby.stats()["requests"] == 0
            with Sim(port=primary_at.port, extra_args=EXACT_SIM_COUNTS) as primary:
                body = wait_status(gw, lambda b: health(b) == {"primary": "healthy", "standby": "healthy"})
                assert body["failover_unaccepted"] is None, body
                code, headers, answer = gw.json("POST", "/v1/chat/completions", chat_body(max_tokens=1))
                assert code == 200, answer
                assert primary.stats()["requests"] == 1 and standby.stats()["requests"] == 0
                assert sorted(backend_up_lines(gw)) == [
                    'dpgate_backend_up{backend="primary",role="primary"} 1',
                    'dpgate_backend_up{backend="primary",role="standby"} 0',
                    'dpgate_backend_up{backend="standby",role="primary"} 0',
                    'dpgate_backend_up{backend="standby",role="standby"} 1']
                logs = log_text(gw)
                assert alarms(gw) == [], logs
                assert "backend primary is not reachable yet (connect: Connection refused)" in logs, logs
                assert "backend primary is up" in logs and "backend standby is up" in logs, logs
                assert "is down" not in logs and "FAILOVER" not in logs, logs


def test_a_gateway_started_after_its_backends_raises_no_alarm():
    with Sim() as primary, Sim() as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])
        with Gateway(config) as gw:
            assert health(status(gw)) == {"primary": "healthy", "standby": "healthy"}
            logs = log_text(gw)
            assert alarms(gw) == [], logs
            assert "not reachable yet" not in logs, logs


def test_a_backend_that_fails_its_first_probe_is_down_at_once():
    # One probe a minute, fall 3: "down" can only be the first probe's verdict.
    with Sim(fault="unhealthy") as primary, Sim() as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")],
                                health={"interval_ms": 60000, "timeout_ms": 1000, "fall": 3, "rise": 2})
        with Gateway(config, wait_healthy=False) as gw:
            body = wait_status(gw, lambda b: "unknown" not in health(b).values())
            assert health(body) == {"primary": "down", "standby": "healthy"}, body
            assert body["backends"][0]["healthy"] is False and body["backends"][0]["probed"] is True
            row = next(line for line in ctl_status(gw).splitlines() if line.startswith("primary "))
            assert row.split()[2] == "down", row
            # A real failover, and as loud as ever.
            assert body["failover_unaccepted"]["message"].startswith("FAILOVER TO UNACCEPTED STANDBY"), body
            logs = log_text(gw)
            assert "dpgate warn: backend primary is down (GET /health answered 503)" in logs, logs
            assert 'dpgate_backend_up{backend="primary",role="primary"} 0' in backend_up_lines(gw)


def test_a_backend_that_never_listens_is_down_after_fall_probes():
    nobody = NotYetStarted(free_port())
    config = gateway_config([("primary", nobody, "primary")],
                            health={"interval_ms": 200, "timeout_ms": 1000, "fall": 3, "rise": 2})
    with Gateway(config, wait_healthy=False) as gw:
        wait_status(gw, lambda b: health(b)["primary"] == "unknown")
        body = wait_status(gw, lambda b: health(b)["primary"] == "down")
        assert body["backends"][0]["last_error"] == "connect: Connection refused", body
        logs = log_text(gw)
        assert "dpgate info: backend primary is not reachable yet (connect: Connection refused)" in logs, logs
        assert "dpgate warn: backend primary is down (connect: Connection refused)" in logs, logs
        assert backend_up_lines(gw) == ['dpgate_backend_up{backend="primary",role="primary"} 0',
                                        'dpgate_backend_up{backend="primary",role="standby"} 0']


def test_status_shows_a_record_right_after_dpgate_accept(tmp_path):
    acceptance_dir = tmp_path / "acceptance"
    # One probe (and one periodic reread of the records) a minute: only the
    # status request itself can find the new record in time.
    with Sim(extra_args=EXACT_SIM_COUNTS) as primary:
        config = gateway_config([("primary", primary, "primary")], acceptance={"dir": str(acceptance_dir)},
                                health={"interval_ms": 60000, "timeout_ms": 1000, "fall": 2, "rise": 2})
        with Gateway(config) as gw:
            assert status(gw)["backends"][0]["acceptance"] is None
            run = subprocess.run([str(bin_dir() / "dpgate"), "accept", "--config", str(gw.config_path), "--backend",
                                  "primary"], capture_output=True, text=True, timeout=600)
            assert run.returncode == 0, run.stdout + run.stderr
            [record] = sorted(acceptance_dir.glob("accept-*.json"))
            backend = status(gw)["backends"][0]
            assert backend["acceptance"] is not None, backend
            assert backend["acceptance"]["file"] == str(record) and backend["acceptance"]["passed"] is True
            assert backend["accepted"] is True and backend["acceptance"]["identity_match"] is True, backend
            assert MODEL in backend["model_ids"]
