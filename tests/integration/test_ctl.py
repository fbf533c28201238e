"""`dpgate ctl` against a real dpgate and simulators: the
status table, --json, flips, drains, reload, accept, watch and exit codes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import time

import pytest

from harness import ADMIN_TOKEN, TOKENIZER, Gateway, Sim, bin_dir, chat_body, free_port, gateway_config, poll

RANK_HEADER = ["BACKEND", "RANK", "IN_FLIGHT", "QUEUED_PREFILL", "RECENT_PREFILL", "RUNNING", "WAITING", "KV_USAGE", "CACHE_HIT"]


def ctl(*args: str, token: str | None = ADMIN_TOKEN, env: dict | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    run_env = {k: v for k, v in os.environ.items() if k != "DPGATE_ADMIN_TOKEN"}
    if token is not None:
        run_env["DPGATE_ADMIN_TOKEN"] = token
    run_env.update(env or {})
    return subprocess.run([str(bin_dir() / "dpgate"), "ctl", *args], capture_output=True, text=True,
                          timeout=timeout, env=run_env)


def admin_url(gw: Gateway) -> str:
    return f"http://127.0.0.1:{gw.admin_port}"


def cell(value, ratio: bool = False) -> str:
    """What the table shows for a JSON value (status_table.cpp's cellText, ratioText)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if ratio:
        return f"{value:.3f}"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.3f}"
    return str(value)


def rank_rows(stdout: str) -> dict[tuple[str, int], dict[str, str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["BACKEND", "RANK"])
    header = lines[start].split()
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        values = dict(zip(header, line.split()))
        rows[(values["BACKEND"], int(values["RANK"]))] = values
    return rows


def backend_rows(stdout: str) -> dict[str, list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["BACKEND", "ROLE"])
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return rows


def roles(body) -> dict[str, str]:
    return {b["name"]: b["role"] for b in body["backends"]}


@pytest.fixture
def pair():
    with Sim() as primary, Sim() as standby:
        backends = [("primary", primary, "primary"), ("standby", standby, "standby")]
        with Gateway(gateway_config(backends)) as gw:
            yield gw


def test_status_table_shows_both_backends_and_every_rank_with_the_simulators_numbers(pair):
    gw = pair
    for text in ["one " * 300, "one " * 300, "two " * 50, "three " * 50]:  # a repeat, for the cache hit ratio
        status, _, body = gw.json("POST", "/v1/chat/completions", chat_body(text))
        assert status == 200, body
    run = ctl("--admin", admin_url(gw), "status")
    assert run.returncode == 0, run.stderr
    api = gw.admin("GET", "/admin/status")[2]

    assert run.stdout.startswith(f"model {api['model']}  public window {api['public_window']}")
    assert "roles from config" in run.stdout and "last flip none" in run.stdout
    backends = backend_rows(run.stdout)
    assert backends["primary"][:5] == ["primary", "primary", "healthy", "routable", "1048576"]
    assert backends["standby"][:5] == ["standby", "standby", "healthy", "routable", "1048576"]
    assert "0.0.0-sim dpgate-sim" in run.stdout and "none" in run.stdout  # identity; no acceptance record

    rows = rank_rows(run.stdout)
    assert sorted(rows) == [(name, r) for name in ("primary", "standby") for r in range(8)]
    assert run.stdout.splitlines()[-17].split() == RANK_HEADER
    served = 0
    for b in api["backends"]:
        for slot in b["slots"]:
            row = rows[(b["name"], slot["rank"])]
            # The backend's own numbers (idle now, so stable between the two reads).
            for column, key in [("RUNNING", "running"), ("WAITING", "waiting"), ("KV_USAGE", "kv_cache_usage"),
                                ("CACHE_HIT", "prefix_cache_hit_ratio"), ("QUEUED_PREFILL", "queued_prefill_tokens"),
                                ("IN_FLIGHT", "in_flight")]:
                expected = cell(slot[key], ratio=column in ("KV_USAGE", "CACHE_HIT"))
                assert row[column] == expected, (b["name"], slot["rank"], column, row, slot)
            assert row["RUNNING"] != "-"  # the simulators answered their /metrics
            served += slot["recent_prefill_tokens"] > 0
    assert served >= 1


def test_json_prints_the_apis_answer(pair):
    gw = pair
    run = ctl("--admin", admin_url(gw), "--json", "status")
    assert run.returncode == 0, run.stderr
    mine = json.loads(run.stdout)
    api = gw.admin("GET", "/admin/status")[2]

    def steady(body):  # what changes between two reads a moment apart
        body = json.loads(json.dumps(body))
        for key in ("open_connections", "requests_in_flight"):
            body.pop(key)
        for b in body["backends"]:
            if b["backend_metrics"]:
                b["backend_metrics"].pop("age_ms")
        return body

    assert steady(mine) == steady(api)
    # And on a command: the API's answer to the drain.
    run = ctl("--admin", admin_url(gw), "--json", "drain", "standby")
    assert run.returncode == 0, run.stderr
    assert [b["drained"] for b in json.loads(run.stdout)["backends"]] == [False, True]


def test_flip_refusal_and_forced_flip(pair, monkeypatch):
    gw = pair
    url = admin_url(gw)
    run = ctl("--admin", url, "flip", "--expect-primary", "standby", "--to", "standby")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "refused (HTTP 409)" in run.stderr
    assert "the primary is 'primary', not 'standby' as expected" in run.stderr
    # Not accepted: refused, with the reason.
    run = ctl("--admin", url, "flip", "--expect-primary", "primary", "--to", "standby")
    assert run.returncode == 1 and "standby is not accepted" in run.stderr, run.stderr
    assert roles(gw.admin("GET", "/admin/status")[2]) == {"primary": "primary", "standby": "standby"}

    run = ctl("--admin", url, "flip", "--expect-primary", "primary", "--to", "standby", "--force",
              env={"USER": "ops"})
    assert run.returncode == 0, run.stderr
    assert "flipped: standby is the primary (was primary), forced" in run.stdout
    body = gw.admin("GET", "/admin/status")[2]
    assert roles(body) == {"primary": "standby", "standby": "primary"}
    assert body["last_flip"]["who"] == "ops@ctl" and body["last_flip"]["forced"] is True

    run = ctl("--admin", url, "flip", "--expect-primary", "standby", "--to", "primary", "--force", "--by", "bob")
    assert run.returncode == 0, run.stderr
    body = gw.admin("GET", "/admin/status")[2]
    assert roles(body) == {"primary": "primary", "standby": "standby"} and body["last_flip"]["who"] == "bob"
    status = ctl("--admin", url, "status").stdout
    assert "standby -> primary by bob (forced)" in status


def test_drain_undrain_and_reload(pair):
    gw = pair
    url = admin_url(gw)
    run = ctl("--admin", url, "drain", "standby")
    assert run.returncode == 0 and run.stdout == "standby drained\n", run.stdout + run.stderr
    body = gw.admin("GET", "/admin/status")[2]
    assert [b["drained"] for b in body["backends"]] == [False, True]
    assert backend_rows(ctl("--admin", url, "status").stdout)["standby"][3] == "drained"

    run = ctl("--admin", url, "undrain", "standby")
    assert run.returncode == 0 and run.stdout == "standby undrained\n", run.stdout + run.stderr
    assert [b["drained"] for b in gw.admin("GET", "/admin/status")[2]["backends"]] == [False, False]

    run = ctl("--admin", url, "drain", "nobody")
    assert run.returncode == 1 and "no backend named 'nobody'" in run.stderr, run.stderr

    run = ctl("--admin", url, "reload")
    assert run.returncode == 0 and "reloaded" in run.stdout, run.stdout + run.stderr
    run = ctl("--admin", url, "--json", "reload")
    assert run.returncode == 0 and json.loads(run.stdout) == {"reloaded": str(gw.config_path)}, run.stdout


def test_wrong_token_is_refused_with_the_apis_reason(pair):
    run = ctl("--admin", admin_url(pair), "status", token="not-the-token")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "HTTP 401" in run.stderr and "admin token" in run.stderr


def test_unreachable_admin_api_exits_3():
    url = f"http://127.0.0.1:{free_port()}"
    for command in (["status"], ["drain", "x"], ["flip", "--expect-primary", "a", "--to", "b"]):
        run = ctl("--admin", url, *command)
        assert run.returncode == 3, run.stdout + run.stderr
        assert f"cannot reach the admin API at {url}" in run.stderr


@pytest.mark.parametrize("args, words", [
    ([], "missing command"),
    (["--admin", "http://127.0.0.1:1", "frobnicate"], "unknown command 'frobnicate'"),
    (["--admin", "http://127.0.0.1:1", "flip", "--to", "b"], "flip needs --expect-primary A --to B"),
    (["--admin", "http://127.0.0.1:1", "drain"], "drain needs one backend name"),
    (["--admin", "http://127.0.0.1:1", "status", "extra"], "status takes no arguments"),
    (["--admin", "http://127.0.0.1:1", "status", "--force"], "belong to flip"),
    (["--admin", "http://127.0.0.1:1", "watch", "--count", "0"], "--count needs a number above 0"),
    (["--admin", "http://127.0.0.1:1", "--bogus", "status"], "unknown option '--bogus'"),
    (["--admin", "ftp://127.0.0.1:1", "status"], "--admin: expected http://HOST:PORT"),
    (["status"], "give --config FILE or --admin URL"),
    (["--admin", "http://127.0.0.1:1", "accept", "b"], "accept needs --config FILE"),
])
def test_usage_errors_exit_2(args, words):
    run = ctl(*args)
    assert run.returncode == 2, run.stdout + run.stderr
    assert words in run.stderr


def test_no_token_is_a_usage_error():
    run = ctl("--admin", "http://127.0.0.1:1", "status", token=None)
    assert run.returncode == 2 and "no admin token" in run.stderr, run.stderr


def test_config_gives_address_and_token(tmp_path):
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    with Sim() as primary:
        config = gateway_config([("primary", primary, "primary")])
        config["admin"] = {"address": "127.0.0.1", "port": free_port(), "token_file": str(token_file)}
        with Gateway(config) as gw:
            # The token from admin.token_file, no environment needed.
            run = ctl("--config", str(gw.config_path), "status", token=None)
            assert run.returncode == 0, run.stderr
            assert backend_rows(run.stdout)["primary"][1] == "primary"
            # --admin-token-file wins over the config's file.
            wrong = tmp_path / "wrong"
            wrong.write_text("nope\n")
            run = ctl("--config", str(gw.config_path), "--admin-token-file", str(wrong), "status", token=None)
            assert run.returncode == 1 and "admin token" in run.stderr, run.stderr

    # A config that stores only the token's hash: the token comes from elsewhere.
    hashed = tmp_path / "hashed.yaml"
    with Sim() as primary:
        config = gateway_config([("primary", primary, "primary")])
        config["admin"] = {"address": "127.0.0.1", "port": free_port(),
                           "token": "sha256:" + hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()}
        hashed.write_text(json.dumps(config))
        with Gateway(config):
            run = ctl("--config", str(hashed), "status", token=None)
            assert run.returncode == 2 and "SHA-256" in run.stderr, run.stderr
            run = ctl("--config", str(hashed), "status")  # DPGATE_ADMIN_TOKEN
            assert run.returncode == 0, run.stderr
            run = ctl("--config", str(hashed), "--admin-token-file", str(token_file), "status", token=None)
            assert run.returncode == 0, run.stderr


def test_in_flight_counts_a_request_on_its_rank_while_it_runs():
    # The primary sends each stream chunk 100 ms apart: a request stays in flight for seconds.
    with Sim(fault="slow:100") as primary, Sim() as standby:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            idle = gw.admin("GET", "/admin/status")[2]
            assert all(slot["in_flight"] == 0 for b in idle["backends"] for slot in b["slots"])
            body = {**chat_body("a slow answer"), "stream": True, "max_tokens": 30}
            done = {}
            worker = threading.Thread(
                target=lambda: done.update(status=gw.request("POST", "/v1/chat/completions", body, timeout=60)[0]))
            worker.start()
            try:
                seen = []
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not seen:
                    run = ctl("--admin", admin_url(gw), "status")
                    assert run.returncode == 0, run.stderr
                    seen = [key for key, row in rank_rows(run.stdout).items() if row["IN_FLIGHT"] == "1"]
                assert len(seen) == 1 and seen[0][0] == "primary", seen
            finally:
                worker.join()
            assert done["status"] == 200
            # The slot is released after the answer's last write: poll.
            def idle(body):
                return all(slot["in_flight"] == 0 for b in body["backends"] for slot in b["slots"])

            after = poll(lambda: gw.admin("GET", "/admin/status")[2], idle)
            assert idle(after), after


def test_with_no_address_it_reads_dpgate_config_and_a_demo_configs_plain_token(tmp_path):
    with Sim() as primary:
        config = gateway_config([("primary", primary, "primary")])
        config["admin"] = {"address": "127.0.0.1", "port": free_port(), "token_plain": ADMIN_TOKEN}
        with Gateway(config) as gw:
            run = ctl("status", token=None, env={"DPGATE_CONFIG": str(gw.config_path)})
            assert run.returncode == 0, run.stderr
            assert backend_rows(run.stdout)["primary"][1] == "primary"


def test_watch_redraws_until_its_count(pair):
    started = time.monotonic()
    run = ctl("--admin", admin_url(pair), "watch", "--count", "2")
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - started >= 1.0  # one second between redraws
    assert run.stdout.count("dpgate ctl watch ") == 2
    assert sum(line.split() == RANK_HEADER for line in run.stdout.splitlines()) == 2
    assert "\033[" not in run.stdout  # not a terminal: no screen clearing


def test_accept_runs_the_acceptance_program_and_saves_a_record(tmp_path):
    acc = tmp_path / "acc"
    with Sim(extra_args=["--tokenizer", str(TOKENIZER)]) as primary:
        config = tmp_path / "dpgate.yaml"
        config.write_text(json.dumps(gateway_config([("primary", primary, "primary")],
                                                    acceptance={"dir": str(acc)})))
        run = ctl("--config", str(config), "accept", "primary", token=None, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "ACCEPTED primary: 10 of 10 checks passed" in run.stdout
        [record] = sorted(acc.glob("accept-primary-*.json"))
        assert json.loads(record.read_text())["passed"] is True
        run = ctl("--config", str(config), "accept", "nobody", token=None)
        assert run.returncode == 2 and "no backend named 'nobody'" in run.stderr, run.stderr


def test_help_lists_the_commands_and_exit_codes():
    run = ctl("--help", token=None)
    assert run.returncode == 0, run.stderr
    for words in ("status", "watch [--count N]", "flip --expect-primary A --to B", "drain NAME", "reload",
                  "accept NAME", "exit codes: 0 done, 1 refused"):
        assert words in run.stdout
    run = subprocess.run([str(bin_dir() / "dpgate"), "--help"], capture_output=True, text=True)
    assert "dpgate ctl" in run.stdout
