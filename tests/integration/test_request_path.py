"""Every request gets an answer, an access-log line and its in-flight count
back, however it ends: texts from the request that are not UTF-8 or are cut
mid-character, and a request that fails inside dpgate (a bug) — which gets a
500, a log line, dpgate_internal_errors_total and an access record, while
the next request on the same gateway is served as usual."""

from __future__ import annotations

import json
import time

from harness import ADMIN_TOKEN, Gateway, Sim, chat_body, gateway_config, http_request, json_lines, metric_sample

CHAT = "/v1/chat/completions"


def access_lines(log, count: int, timeout: float = 5.0) -> list[dict]:
    """The log's lines other than the harness's /health polls, once there are
    at least `count` of them (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in json_lines(log) if line["path"] != "/health"]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def access_line(log, request_id: str, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        for line in access_lines(log, 0):
            if line["request_id"] == request_id:
                return line
        assert time.monotonic() < deadline, f"no access line for {request_id}"
        time.sleep(0.05)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def error_of(answer: bytes) -> dict:
    body = answer.split(b"\r\n\r\n", 1)[1]
    return json.loads(body.decode("utf-8"))["error"]  # strict: the body must be UTF-8


def in_flight(gw: Gateway) -> int:
    return gw.admin("GET", "/admin/status")[2]["requests_in_flight"]


def test_texts_that_are_not_utf8_or_cut_mid_character_get_a_clean_error(tmp_path):
    log = tmp_path / "access.log"
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")], log={"access": str(log)})) as gw:
        # A target that is not UTF-8, no key needed: 404, not a closed connection.
        answer = gw.raw(b"GET /\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status_of(answer) == 404
        error = error_of(answer)
        assert error["code"] == "not_found" and "/\ufffd" in error["message"]

        # A model of 199 ASCII characters and an e-acute: the quote stops
        # before the character it would cut.
        model = "m" * 199 + "\u00e9"
        status, _, body = gw.json("POST", CHAT, {"model": model, "messages": [{"role": "user", "content": "x"}]})
        assert status == 404 and body["error"]["code"] == "model_not_found"
        assert "m" * 199 + "`" in body["error"]["message"]

        # A content part type cut at 40 bytes, mid-character.
        part_type = "t" * 39 + "\u00e9"
        status, _, body = gw.json("POST", CHAT, {"model": "ds-v4.1-flash-1017", "messages": [
            {"role": "user", "content": [{"type": part_type, "text": "x"}]}]})
        assert status == 400
        assert '"' + "t" * 39 + '"' in body["error"]["message"]

        # Every one of them logged, none left in flight, and the gateway serves on.
        lines = access_lines(log, 3)
        assert sorted(l["status"] for l in lines) == [400, 404, 404]
        assert "/\ufffd" in [l["path"] for l in lines]
        assert in_flight(gw) == 0
        assert gw.request("POST", CHAT, chat_body("still here", max_tokens=2))[0] == 200


def test_a_failure_inside_dpgate_is_a_500_a_log_line_a_metric_and_an_access_record(tmp_path, monkeypatch):
    monkeypatch.setenv("DPGATE_TEST_FAULTS", "1")
    log = tmp_path / "access.log"
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")], log={"access": str(log)})) as gw:
        status, headers, body = gw.json("POST", CHAT, chat_body("x"),
                                        {"X-Dpgate-Test-Fault": "throw", "X-Request-ID": "req-bug"})
        assert status == 500
        assert body["error"]["code"] == "internal_error" and body["error"]["type"] == "server_error"
        assert "req-bug" in body["error"]["message"]
        assert headers["x-request-id"] == "req-bug"

        line = access_line(log, "req-bug")
        assert line["status"] == 500 and line["rejection"] == "internal_error"
        page = http_request(gw.admin_port, "GET", "/metrics",
                            {"Authorization": f"Bearer {ADMIN_TOKEN}"})[2].decode()
        assert metric_sample(page, "dpgate_internal_errors_total") == 1
        assert "request req-bug: internal error: test fault" in gw.process.stderr() + gw.process.stdout()
        assert in_flight(gw) == 0

        # The next request, on a fresh connection, is served as usual.
        assert gw.request("POST", CHAT, chat_body("after the bug", max_tokens=2))[0] == 200
