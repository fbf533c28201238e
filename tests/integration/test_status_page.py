"""The operators' status page (/admin/ on the admin listener), in a real
browser: the system's headless Chromium driven by playwright-core
(status_page_driver.cjs), through a real dpgate in front of two simulators
with 8 DP ranks each.

scripts/setup installs Chromium (Debian `chromium`), Node.js and the pinned
playwright-core; a missing one fails these tests rather than skipping them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from harness import (ADMIN_TOKEN, MODEL, REPO_ROOT, TOKENIZER, Gateway, Sim, bin_dir, chat_body, gateway_config, http_json,
                     http_request)

DRIVER = Path(__file__).resolve().parent / "status_page_driver.cjs"
CHAT = "/v1/chat/completions"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# Recent prefill work decays over routing.work_window_ms; a day (the
# longest allowed) keeps the numbers still while a test compares them.
STILL = {"work_window_ms": 86400000}


def tools() -> tuple[str, str, str]:
    node = shutil.which("node")
    if not node:
        pytest.fail("node not found: run scripts/setup")
    chromium = os.environ.get("DPGATE_CHROMIUM", "/usr/bin/chromium")
    if not os.access(chromium, os.X_OK):
        pytest.fail(f"{chromium} not found: run scripts/setup (Debian package chromium)")
    node_path = os.environ.get("NODE_PATH", str(REPO_ROOT / "local" / "npm" / "node_modules"))
    if not any((Path(p) / "playwright-core" / "package.json").is_file() for p in node_path.split(os.pathsep) if p):
        pytest.fail(f"playwright-core not found in NODE_PATH={node_path}: run scripts/setup")
    return node, chromium, node_path


def drive(gw: Gateway, steps: list[dict]) -> dict:
    """Runs the steps in one fresh browser page at the gateway's /admin/."""
    node, chromium, node_path = tools()
    spec = {"url": f"http://127.0.0.1:{gw.admin_port}/admin/", "admin_token": ADMIN_TOKEN, "steps": steps}
    env = {**os.environ, "NODE_PATH": node_path, "DPGATE_CHROMIUM": chromium}
    out = subprocess.run([node, str(DRIVER)], input=json.dumps(spec), capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, f"driver failed:\n{out.stderr}\n{out.stdout}"
    result = json.loads(out.stdout)
    # A CSP refusal or a script error would show here first.
    assert result["console_errors"] == [] and result["page_errors"] == [], result
    assert len(result["results"]) == len(steps)
    return result


def admin_status(gw: Gateway) -> dict:
    status, _, body = http_json(gw.admin_port, "GET", "/admin/status", headers=ADMIN)
    assert status == 200, body
    return body


def roles(status: dict) -> dict[str, str]:
    return {b["name"]: b["role"] for b in status["backends"]}


@pytest.fixture
def stack():
    with Sim() as primary, Sim() as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")], routing=STILL)
        with Gateway(config) as gw:
            yield gw


@pytest.fixture
def accepted_stack(tmp_path):
    """As `stack`, with the standby accepted (`dpgate accept`): a flip to it
    passes the record check, as an operator's would."""
    real = ["--tokenizer", str(TOKENIZER)]
    with Sim(extra_args=real) as primary, Sim(extra_args=real) as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")], routing=STILL,
                                acceptance={"dir": str(tmp_path / "acceptance")})
        path = tmp_path / "dpgate.yaml"
        path.write_text(json.dumps(config))
        run = subprocess.run([str(bin_dir() / "dpgate"), "accept", "--config", str(path), "--backend", "standby"],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        with Gateway(config) as gw:
            deadline = time.monotonic() + 10
            while not admin_status(gw)["backends"][1]["accepted"]:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            yield gw


def js_fixed1(x: float) -> str:
    """JavaScript's x.toFixed(1): the exact value of the double, ties away from zero."""
    return str(Decimal(x).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def element_text(html: str, tag: str) -> str:
    found = re.findall(f"<{tag}>(.*?)</{tag}>", html, re.S)
    assert len(found) == 1, f"expected one <{tag}>"
    return found[0]


def csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_shell_is_open_self_contained_and_under_a_strict_policy(stack):
    gw = stack
    status, headers, body = http_request(gw.admin_port, "GET", "/admin/")
    assert status == 200
    html = body.decode()
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-store"
    policy = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
    # The policy allows the page's own two blocks, by their hash as computed here, and nothing else.
    assert policy == {"default-src": "'none'", "script-src": csp_hash(element_text(html, "script")),
                      "style-src": csp_hash(element_text(html, "style")), "connect-src": "'self'",
                      "base-uri": "'none'", "form-action": "'none'", "frame-ancestors": "'none'"}
    # The shell holds no data: not the backends' addresses, not the token.
    for backend in admin_status(gw)["backends"]:
        assert backend["url"] not in html
    assert ADMIN_TOKEN not in html

    status, headers, _ = http_request(gw.admin_port, "GET", "/admin")
    assert status == 308 and headers["location"] == "/admin/"
    # Only the shell is open: the data and the actions still need the token.
    assert http_request(gw.admin_port, "GET", "/admin/status")[0] == 401
    assert http_request(gw.admin_port, "POST", "/admin/flip", body={"to": "standby"})[0] == 401
    assert http_request(gw.admin_port, "POST", "/admin/")[0] == 401
    assert roles(admin_status(gw)) == {"primary": "primary", "standby": "standby"}


def test_admin_health_answers_without_a_token_and_says_nothing_else(stack):
    gw = stack
    for headers in ({}, {"Authorization": "Bearer wrong"}, ADMIN):
        status, hdrs, body = http_request(gw.admin_port, "GET", "/health", headers)
        assert status == 200 and json.loads(body) == {"status": "ok"}, body
        assert hdrs["content-type"] == "application/json"


def test_the_page_shows_sixteen_ranks_with_the_simulators_numbers(stack):
    gw = stack
    # Two turns of one conversation (the second finds the first's prefix),
    # and a second conversation: recent prefill work and hit ratios to show.
    system = {"role": "system", "content": "Answer in one word. " * 150}
    messages = [system, {"role": "user", "content": "one"}]
    status, headers, _ = gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1, "messages": messages})
    assert status == 200
    messages += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "two"}]
    assert gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1, "messages": messages})[0] == 200
    other = [{"role": "user", "content": "A different conversation. " * 40}]
    assert gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1, "messages": other})[0] == 200
    backend, rank = headers["x-dpgate-route"].split("/")

    result = drive(gw, [{"op": "sign_in", "token": ADMIN_TOKEN}, {"op": "snapshot", "until_hit": True}])
    shown, answer = result["results"][1]["shown"], result["results"][1]["answer"]
    cells = {(c["backend"], c["rank"]): c for c in shown["cells"]}
    assert sorted(cells) == [(b, r) for b in ("primary", "standby") for r in range(8)]

    # The page shows what /admin/status told it, cell for cell, and says it readably.
    fields = ["queued_prefill_tokens", "recent_prefill_tokens", "running", "waiting", "kv_cache_usage",
              "prefix_cache_hit_ratio"]
    for b in answer["backends"]:
        for slot in b["slots"]:
            cell = cells[(b["name"], slot["rank"])]
            assert {f: cell["fields"][f]["value"] for f in fields} == {f: slot[f] for f in fields}
            for f in fields:
                value, text = slot[f], cell["fields"][f]["text"]
                if value is None:
                    assert text == "-"
                elif f in ("kv_cache_usage", "prefix_cache_hit_ratio"):
                    assert text == js_fixed1(value * 100) + " %"
                else:
                    assert text == str(math.floor(value + 0.5))  # Math.round

    # And those are the simulators' numbers: the rank that served the
    # conversation twice has a hit ratio, its backend's ranks report idle.
    served = cells[(backend, int(rank))]["fields"]
    assert 0 < served["prefix_cache_hit_ratio"]["value"] < 1
    assert served["recent_prefill_tokens"]["value"] > 0
    assert all(cells[(backend, r)]["fields"]["running"]["value"] == 0 for r in range(8))
    now = admin_status(gw)
    for b in now["backends"]:
        for slot in b["slots"]:
            cell = cells[(b["name"], slot["rank"])]["fields"]
            for f in ("running", "waiting", "kv_cache_usage", "prefix_cache_hit_ratio", "queued_prefill_tokens"):
                assert cell[f]["value"] == slot[f], (b["name"], slot["rank"], f)
            assert abs(cell["recent_prefill_tokens"]["value"] - slot["recent_prefill_tokens"]) <= 1

    # Coloured by load: the busiest rank is darker than an idle one.
    busiest = max(shown["cells"], key=lambda c: c["load"])
    idle = next(c for c in shown["cells"] if c["fields"]["recent_prefill_tokens"]["value"] == 0)
    assert busiest["load"] == 1 and idle["load"] == 0
    assert busiest["background"] != idle["background"]

    assert [(r["backend"], r["role"], r["healthy"], r["drained"]) for r in shown["rows"]] == [
        ("primary", "primary", "healthy", "no"), ("standby", "standby", "healthy", "no")]
    assert shown["rows"][0]["actions"] == ["drain"] and shown["rows"][1]["actions"] == ["flip", "drain"]
    assert not shown["notice_visible"]
    assert result["posts"] == []


def test_a_flip_from_the_page_asks_first_and_then_swaps_the_roles(accepted_stack):
    gw = accepted_stack
    result = drive(gw, [
        {"op": "sign_in", "token": ADMIN_TOKEN},
        {"op": "snapshot", "until_hit": False},
        {"op": "act", "action": "flip", "backend": "standby", "confirm": False},
        {"op": "act", "action": "flip", "backend": "standby", "confirm": True},
        {"op": "wait_role", "backend": "standby", "role": "primary"},
        {"op": "act", "action": "drain", "backend": "primary", "confirm": True},
    ])
    dismissed, flipped, _, drained = result["results"][2:]
    assert dismissed["questions"][0]["type"] == "confirm"
    assert '"standby" the primary' in dismissed["questions"][0]["message"]
    assert '"primary"' in dismissed["questions"][0]["message"]  # the primary it expects
    # Dismissed: nothing sent. Confirmed: one flip, then one drain.
    assert result["posts"] == ["/admin/flip", "/admin/drain/primary"]
    assert flipped["outcome"] == "Flipped: standby is now the primary." and "ok" in flipped["outcome_class"]
    assert drained["outcome"] == "Drained primary." and "ok" in drained["outcome_class"]

    now = admin_status(gw)
    assert roles(now) == {"primary": "standby", "standby": "primary"}
    assert now["last_flip"]["who"] == "status page" and now["last_flip"]["forced"] is False
    assert {b["name"]: b["drained"] for b in now["backends"]} == {"primary": True, "standby": False}
    status, headers, _ = gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1,
                                                "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200 and headers["x-dpgate-route"].startswith("standby/")

    result = drive(gw, [{"op": "sign_in", "token": ADMIN_TOKEN}, {"op": "snapshot", "until_hit": False},
                        {"op": "act", "action": "undrain", "backend": "primary", "confirm": True}])
    assert result["results"][2]["outcome"] == "Undrained primary."
    assert result["posts"] == ["/admin/undrain/primary"]
    assert {b["name"]: b["drained"] for b in admin_status(gw)["backends"]} == {"primary": False, "standby": False}


def test_a_refused_flip_shows_the_apis_reason_and_changes_nothing(accepted_stack):
    gw = accepted_stack
    # The page shows "primary" as the primary; another operator flips
    # meanwhile. The page's flip names the primary it saw, and is refused.
    result = drive(gw, [
        {"op": "sign_in", "token": ADMIN_TOKEN},
        {"op": "snapshot", "until_hit": False, "hold": True},
        {"op": "api", "method": "POST", "path": "/admin/flip", "body": {"expect_primary": "primary", "to": "standby"}},
        {"op": "act", "action": "flip", "backend": "standby", "confirm": True},
        {"op": "release"},
        {"op": "wait_role", "backend": "standby", "role": "primary"},
    ])
    assert result["results"][2]["status"] == 200
    refused = result["results"][3]
    assert "error" in refused["outcome_class"]
    assert refused["outcome"].startswith("Flip not done: "), refused
    assert "the primary is 'standby', not 'primary'" in refused["outcome"], refused
    assert refused["outcome"].endswith("(flip_refused, HTTP 409)"), refused
    assert roles(admin_status(gw)) == {"primary": "standby", "standby": "primary"}


def test_a_wrong_token_is_refused_with_a_clear_message_and_the_form_again(stack):
    gw = stack
    result = drive(gw, [
        {"op": "sign_in", "token": "not-the-admin-token"},
        {"op": "wait_notice", "text": "refused"},
        {"op": "sign_in", "token": ADMIN_TOKEN},
        {"op": "snapshot", "until_hit": False},
    ])
    refused = result["results"][1]
    assert refused["notice"].startswith("The admin token was refused: the admin API needs "
                                        "'Authorization: Bearer <admin token>'. (invalid_admin_token, HTTP 401)")
    assert refused["notice_visible"] and "error" in refused["notice_class"]
    assert refused["form_visible"] and not refused["status_visible"]
    assert refused["stored_token"] is None  # a refused token is not kept
    assert "undefined" not in refused["body_text"] and "NaN" not in refused["body_text"]
    # The right token then works in the same page.
    assert len(result["results"][3]["shown"]["cells"]) == 16
    assert result["posts"] == []


# The fields of /admin/status on roles, flips, identity and acceptance; the
# page shows them when present (here added to the real answers on their way
# to the page) and does without when absent or null.
ACCEPTANCE_FIELDS = {
    "top": {
        "roles": {"source": "state", "since": "2026-12-03T10:00:00Z"},
        "last_flip": {"who": "alice", "at": "2026-12-03T09:59:00Z", "from": "standby", "to": "primary",
                      "forced": True},
        "recent_flips": [
            {"who": "alice", "at": "2026-12-03T09:59:00Z", "from": "standby", "to": "primary", "forced": True},
            {"who": "status page", "at": "2026-12-02T17:00:00Z", "from": "primary", "to": "standby",
             "forced": False}],
        "failover_unaccepted": {"backend": "standby", "at": "2026-12-03T09:00:00Z",
                                "message": "standby has no accepted record"},
    },
    "backends": {
        "primary": {
            "identity": {"model_id": MODEL, "window": 1048576, "version": "0.9.2", "server": "uvicorn"},
            "acceptance": {"file": "accept-primary-20261201T080000Z.json", "time": "2026-12-01T08:00:00Z",
                           "passed": True, "identity_match": True, "failed": []}},
        "standby": {
            "identity": {"model_id": MODEL, "window": 524288, "version": None, "server": "uvicorn"},
            "acceptance": {"file": "accept-standby-20261130T080000Z.json", "time": "2026-11-30T08:00:00Z",
                           "passed": False, "identity_match": False, "failed": ["window", "count_agreement"]}},
    },
}
ACCEPTANCE_NULLS = {
    "top": {"roles": {"source": "config", "since": None}, "last_flip": None, "recent_flips": [],
            "failover_unaccepted": None},
    "backends": {"primary": {"identity": None, "acceptance": None}, "standby": {"identity": None, "acceptance": None}},
}


def test_the_page_shows_roles_flips_identity_and_acceptance_when_the_api_has_them(stack):
    gw = stack
    result = drive(gw, [{"op": "augment", **ACCEPTANCE_FIELDS}, {"op": "sign_in", "token": ADMIN_TOKEN},
                        {"op": "snapshot", "until_hit": False}])
    shown = result["results"][2]["shown"]
    assert shown["roles"] == ("Primary: primary. Roles from state since 2026-12-03T10:00:00Z. Last flip: standby "
                              "\u2192 primary at 2026-12-03T09:59:00Z by alice (forced).")
    assert shown["flips"] == ["standby \u2192 primary at 2026-12-03T09:59:00Z by alice (forced)",
                              "primary \u2192 standby at 2026-12-02T17:00:00Z by status page"]
    assert ("Failover went to a standby without an accepted record: standby at 2026-12-03T09:00:00Z: "
            "standby has no accepted record") in shown["alerts"]
    rows = {r["backend"]: r for r in shown["rows"]}
    assert rows["primary"]["identity"] == f"{MODEL} \u00b7 window 1048576 \u00b7 0.9.2 \u00b7 uvicorn"
    assert rows["standby"]["identity"] == f"{MODEL} \u00b7 window 524288 \u00b7 uvicorn"
    assert rows["primary"]["acceptance"] == "passed 2026-12-01T08:00:00Z"
    assert rows["standby"]["acceptance"] == ("FAILED 2026-11-30T08:00:00Z; identity differs from now; "
                                             "failed: window, count_agreement")
    assert len(shown["cells"]) == 16


def test_the_page_does_without_those_fields_when_they_are_null_or_absent(stack):
    gw = stack
    result = drive(gw, [{"op": "augment", **ACCEPTANCE_NULLS}, {"op": "sign_in", "token": ADMIN_TOKEN},
                        {"op": "snapshot", "until_hit": False}])
    shown = result["results"][2]["shown"]
    assert shown["roles"] == "Primary: primary. Roles from config."
    assert shown["flips"] == ["none recorded"]
    assert not any(a.startswith("Failover") for a in shown["alerts"])
    assert [(r["identity"], r["acceptance"]) for r in shown["rows"]] == [("-", "no record"), ("-", "no record")]
    # The real answer of a gateway without records or state: roles from the
    # config since its start, no flips, each backend's identity as probed.
    result = drive(gw, [{"op": "sign_in", "token": ADMIN_TOKEN}, {"op": "snapshot", "until_hit": False}])
    shown, answer = result["results"][1]["shown"], result["results"][1]["answer"]
    assert answer["roles"]["source"] == "config" and answer["last_flip"] is None
    assert shown["roles"] == f"Primary: primary. Roles from config since {answer['roles']['since']}."
    assert shown["flips"] == ["none recorded"]
    assert [(r["identity"], r["acceptance"]) for r in shown["rows"]] == [
        (f"{MODEL} \u00b7 window 1048576 \u00b7 0.0.0-sim \u00b7 dpgate-sim", "no record")] * 2


def test_a_token_no_header_can_carry_is_caught_by_the_page(stack):
    gw = stack
    result = drive(gw, [{"op": "sign_in", "token": "t\u00f8ken"}, {"op": "wait_notice", "text": "not an admin token"},
                        {"op": "sign_in", "token": ADMIN_TOKEN}, {"op": "snapshot", "until_hit": False}])
    caught = result["results"][1]
    assert caught["form_visible"] and not caught["status_visible"] and caught["stored_token"] is None
    assert len(result["results"][3]["shown"]["cells"]) == 16


def test_the_page_shows_the_keys_that_used_most_today(stack):
    gw = stack
    result = drive(gw, [{"op": "sign_in", "token": ADMIN_TOKEN}, {"op": "snapshot", "until_hit": False}])
    assert result["results"][1]["shown"]["keys_visible"] is False  # nobody used it yet
    for _ in range(3):
        status, _, body = gw.json("POST", "/v1/chat/completions", chat_body("Hello!", max_tokens=5))
        assert status == 200, body
    result = drive(gw, [{"op": "sign_in", "token": ADMIN_TOKEN}, {"op": "snapshot", "until_hit": False}])
    snapshot = result["results"][1]
    shown, answer = snapshot["shown"], snapshot["answer"]
    assert shown["keys_visible"] is True
    assert shown["budgets"].startswith("Budgets kept by this process.")
    top = answer["top_keys"][0]
    assert top["key"] == "local-demo" and top["requests_today"] == 3 and top["tokens_today"] > 0
    assert shown["keys"] == [{"key": "local-demo", "cells": [
        "local-demo", str(top["tokens_today"]), "3", str(top["tokens_last_minute"]), "3"]}]
