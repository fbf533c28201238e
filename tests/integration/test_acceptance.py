"""`dpgate accept` against real simulators, records guarding flips
and the public window, and roles that survive a restart."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness import ADMIN_TOKEN, MODEL, TOKENIZER, Gateway, Sim, bin_dir, free_port, gateway_config, http_request, poll

CHECKS = ["models", "metrics_ranks", "rank_answers", "stream", "prefix_cache", "tool_call", "images_16",
          "images_640", "window_edge", "count_agreement"]


def real_sim(**kw) -> Sim:
    """A simulator that counts prompt tokens with the real tokenizer, as vLLM does."""
    extra = list(kw.pop("extra_args", ()))
    return Sim(extra_args=["--tokenizer", str(TOKENIZER), *extra], **kw)


def write_config(tmp_path: Path, backends, **sections) -> Path:
    path = tmp_path / "dpgate.yaml"
    path.write_text(json.dumps(gateway_config(backends, **sections), indent=2))
    return path


def accept(config: Path, backend: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(bin_dir() / "dpgate"), "accept", "--config", str(config), "--backend", backend,
                           *extra], capture_output=True, text=True, timeout=600)


def verdicts(stdout: str) -> dict[str, tuple[bool, str]]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith(("PASS  ", "FAIL  ")):
            name, _, detail = line[6:].partition(" ")
            out[name] = (line.startswith("PASS"), detail.strip())
    return out


def records(folder: Path) -> list[Path]:
    return sorted(folder.glob("accept-*.json"))


def test_acceptance_passes_on_a_healthy_backend_and_saves_its_record(tmp_path):
    with real_sim() as primary:
        config = write_config(tmp_path, [("primary", primary, "primary")],
                              acceptance={"dir": str(tmp_path / "acceptance")})
        run = accept(config, "primary")
        assert run.returncode == 0, run.stdout + run.stderr
        found = verdicts(run.stdout)
        assert list(found) == CHECKS, run.stdout
        assert all(passed for passed, _ in found.values()), run.stdout
        assert "ms" not in run.stdout.replace("max_model_len", "")  # no timings in the verdicts
        assert "ACCEPTED primary: 10 of 10 checks passed" in run.stdout
        assert "641 refused (too_many_images)" in found["images_640"][1]
        assert "cached_tokens 0 then" in found["prefix_cache"][1]

        [path] = records(tmp_path / "acceptance")
        assert path.name.startswith("accept-primary-") and path.name.endswith("Z.json")
        record = json.loads(path.read_text())
        assert record["format"] == "dpgate-acceptance/1"
        assert record["passed"] is True and record["backend"] == "primary" and record["url"] == primary.url
        assert record["identity"] == {"model_id": MODEL, "max_model_len": 1048576, "version": "0.0.0-sim",
                                      "server": "dpgate-sim"}
        assert record["dp_ranks"] == 8 and record["configured_window"] == 1048576
        for digest in ("config_digest", "template_digest", "tokenizer_digest"):
            assert len(record["dpgate"][digest]) == 64, record["dpgate"]
        assert [c["name"] for c in record["checks"]] == CHECKS
        assert all(c["passed"] for c in record["checks"])


@pytest.mark.parametrize("case", ["wrong_window", "missing_rank", "hidden_cached_tokens", "count_offset"])
def test_acceptance_fails_and_names_the_failure_in_its_verdict_and_record(tmp_path, case):
    sims = {
        "wrong_window": lambda: real_sim(window=524288),
        "missing_rank": lambda: real_sim(dp=7),
        "hidden_cached_tokens": lambda: real_sim(extra_args=["--no-prompt-tokens-details"]),
        "count_offset": lambda: real_sim(extra_args=["--count-offset", "1"]),
    }
    failing, words = {
        "wrong_window": ("models", "has max_model_len 524288, the configured window is 1048576"),
        "missing_rank": ("metrics_ranks", "8 are configured; missing rank 7"),
        "hidden_cached_tokens": ("prefix_cache", "backend does not report cached tokens "
                                                 "(start it with --enable-prompt-tokens-details)"),
        "count_offset": ("count_agreement", "0 of 6 agree; text: dpgate counts "),
    }[case]
    with sims[case]() as backend:
        backends = [("b", backend, "primary")]
        config = write_config(tmp_path, backends, acceptance={"dir": str(tmp_path / "acc")})
        if case == "missing_rank":  # the config says 8 ranks, the backend has 7
            raw = json.loads(config.read_text())
            raw["backends"][0]["dp_ranks"] = 8
            config.write_text(json.dumps(raw))
        run = accept(config, "b")
        assert run.returncode == 1, run.stdout + run.stderr
        found = verdicts(run.stdout)
        assert list(found) == CHECKS
        passed, detail = found[failing]
        assert not passed and words in detail, run.stdout
        assert "NOT ACCEPTED b:" in run.stdout
        [path] = records(tmp_path / "acc")
        record = json.loads(path.read_text())
        assert record["passed"] is False
        saved = {c["name"]: c for c in record["checks"]}
        assert saved[failing]["passed"] is False and words in saved[failing]["detail"]
        if case == "count_offset":
            # Off by one in usage.prompt_tokens: every body disagrees by exactly one.
            assert all(f"dpgate counts {n}, the backend {n + 1}" in detail
                       for n in [int(part.split("dpgate counts ")[1].split(",")[0])
                                 for part in detail.split("; ")[1:]])
        if case == "hidden_cached_tokens":
            assert found["stream"][0] and found["count_agreement"][0]  # only the cache check fails


def test_compare_says_what_changed_between_two_records(tmp_path):
    port = free_port()
    out = tmp_path / "acc"
    for version in ("0.9.0", "0.9.1"):
        with real_sim(extra_args=["--listen", f"127.0.0.1:{port}", "--version", version]) as backend:
            config = write_config(tmp_path, [("b", backend, "primary")])
            run = accept(config, "b", "--out", str(out))
            assert run.returncode == 0, run.stdout + run.stderr
        time.sleep(1.1)  # another second: another file name
    old, new = records(out)
    compare = subprocess.run([str(bin_dir() / "dpgate"), "accept", "--compare", str(old), str(new)],
                             capture_output=True, text=True)
    assert compare.returncode == 1, compare.stdout + compare.stderr
    assert "identity.version: '0.9.0' -> '0.9.1'" in compare.stdout
    assert "identity changed" in compare.stdout
    same = subprocess.run([str(bin_dir() / "dpgate"), "accept", "--compare", str(new), str(new)],
                          capture_output=True, text=True)
    assert same.returncode == 0 and "no change" in same.stdout
    bad = tmp_path / "accept-bad.json"
    bad.write_text('{"format": "dpgate-acceptance/1", "passed": true')
    broken = subprocess.run([str(bin_dir() / "dpgate"), "accept", "--compare", str(old), str(bad)],
                            capture_output=True, text=True)
    assert broken.returncode == 2 and "not an acceptance record" in broken.stderr


def wait_status(gw, predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        body = gw.admin("GET", "/admin/status")[2]
        if predicate(body):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def metrics_text(gw) -> str:
    status, _, data = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200
    return data.decode()


def wait_metrics_line(gw, line: str, timeout: float = 5.0) -> str:
    """/metrics once it has `line` (gauges the health timer refreshes lag
    the status by up to one interval)."""
    return poll(lambda: metrics_text(gw), lambda text: line in text, timeout)


def roles(body) -> dict[str, str]:
    return {b["name"]: b["role"] for b in body["backends"]}


def test_a_flip_needs_the_expected_primary_and_an_accepted_target(tmp_path):
    acc = tmp_path / "acc"
    standby_port = free_port()
    with real_sim() as primary:
        standby = real_sim(extra_args=["--listen", f"127.0.0.1:{standby_port}", "--version", "1.0"])
        backends = [("primary", primary, "primary"), ("standby", standby, "standby")]
        sections = {"acceptance": {"dir": str(acc)}, "state": {"dir": str(tmp_path / "state")}}
        config = write_config(tmp_path, backends, **sections)
        with Gateway(gateway_config(backends, **sections)) as gw:
            flip = {"expect_primary": "primary", "to": "standby", "by": "alice"}
            # Not accepted: refused, naming why.
            status, _, body = gw.admin("POST", "/admin/flip", flip)
            assert status == 409 and body["error"]["code"] == "flip_refused", body
            assert "standby is not accepted: it has no passing acceptance record" in body["error"]["message"]
            # The wrong primary named: refused before anything else.
            status, _, body = gw.admin("POST", "/admin/flip", {**flip, "expect_primary": "standby"})
            assert status == 409 and "the primary is 'primary', not 'standby' as expected" in body["error"]["message"]

            assert accept(config, "standby").returncode == 0
            body = wait_status(gw, lambda b: b["backends"][1]["accepted"])
            entry = body["backends"][1]["acceptance"]
            assert entry["passed"] is True and entry["identity_match"] is True and entry["failed"] == []
            assert body["backends"][1]["identity"] == {"model_id": MODEL, "window": 1048576, "version": "1.0",
                                                       "server": "dpgate-sim"}
            status, _, body = gw.admin("POST", "/admin/flip", flip)
            assert status == 200, body
            assert roles(body) == {"primary": "standby", "standby": "primary"}
            assert body["last_flip"]["who"] == "alice" and body["last_flip"]["from"] == "primary"
            assert body["last_flip"]["to"] == "standby" and body["last_flip"]["forced"] is False
            assert body["roles"]["source"] == "flip"

            # The standby restarted as another build: its record no longer matches.
            standby.stop()
            standby = real_sim(extra_args=["--listen", f"127.0.0.1:{standby_port}", "--version", "1.1"])
            wait_status(gw, lambda b: b["backends"][1]["identity"] and b["backends"][1]["identity"]["version"] == "1.1"
                        and b["backends"][1]["healthy"])
            # Back to primary first (forced: primary has no record), then try standby again.
            status, _, body = gw.admin("POST", "/admin/flip", {"expect_primary": "standby", "to": "primary"})
            assert status == 409 and "primary is not accepted" in body["error"]["message"]
            status, _, body = gw.admin("POST", "/admin/flip", {"expect_primary": "standby", "to": "primary",
                                                               "force": True})
            assert status == 200 and body["last_flip"]["forced"] is True
            status, _, body = gw.admin("POST", "/admin/flip", flip)
            assert status == 409, body
            assert "version '1.1' (the record says '1.0')" in body["error"]["message"]
            text = metrics_text(gw)
            assert "dpgate_forced_flips_total 1" in text and "dpgate_flips_total 2" in text
        standby.stop()


def test_roles_survive_a_restart_and_a_damaged_state_file_is_refused(tmp_path):
    state_dir = tmp_path / "state"
    with Sim() as primary, Sim() as standby:
        backends = [("primary", primary, "primary"), ("standby", standby, "standby")]
        config = gateway_config(backends, state={"dir": str(state_dir)})
        with Gateway(config) as gw:
            assert gw.admin("GET", "/admin/status")[2]["roles"]["source"] == "config"
            status, _, body = gw.admin("POST", "/admin/flip", {"expect_primary": "primary", "to": "standby",
                                                               "force": True, "by": "bob"})
            assert status == 200, body
            assert gw.admin("POST", "/admin/drain/primary")[0] == 200
        saved = json.loads((state_dir / "state.json").read_text())
        assert saved["primary"] == "standby" and saved["drained"] == ["primary"]
        assert saved["flips"][0]["who"] == "bob"

        with Gateway(config) as gw:
            body = gw.admin("GET", "/admin/status")[2]
            assert roles(body) == {"primary": "standby", "standby": "primary"}
            assert body["backends"][0]["drained"] is True
            assert body["roles"]["source"] == "state" and body["roles"]["since"] == saved["written_at"]
            assert body["last_flip"]["who"] == "bob"
            assert "state: roles resumed from" in gw.process.stdout() + gw.process.stderr()

        # Truncated: refused at start, with the way out named.
        text = (state_dir / "state.json").read_text()
        (state_dir / "state.json").write_text(text[: len(text) // 2])
        with pytest.raises(RuntimeError) as failed:
            Gateway(config)
        assert "corrupt" in str(failed.value) and "--ignore-state" in str(failed.value)
        with Gateway(config, extra_args=["--ignore-state"]) as gw:
            body = gw.admin("GET", "/admin/status")[2]
            assert roles(body) == {"primary": "primary", "standby": "standby"}
            assert body["roles"]["source"] == "config"

        # Another gateway's state (other backends): refused too.
        foreign = dict(saved, backends=["a", "b"], primary="a", drained=[])
        (state_dir / "state.json").write_text(json.dumps(foreign))
        with pytest.raises(RuntimeError) as failed:
            Gateway(config)
        assert "not this gateway's state" in str(failed.value)


@pytest.mark.parametrize("required", [False, True])
def test_failover_to_an_unaccepted_standby_is_loud_or_refused(tmp_path, required):
    with Sim() as standby:
        primary = Sim()
        backends = [("primary", primary, "primary"), ("standby", standby, "standby")]
        config = gateway_config(backends, routing={"failover_requires_acceptance": required},
                                acceptance={"dir": str(tmp_path / "acc")})
        with Gateway(config) as gw:
            assert gw.admin("GET", "/admin/status")[2]["failover_unaccepted"] is None
            primary.stop()
            body = wait_status(gw, lambda b: b["failover_unaccepted"] is not None)
            note = body["failover_unaccepted"]
            assert note["backend"] == "standby" and note["blocked"] is required
            status, _, answer = gw.json("POST", "/v1/chat/completions",
                                        {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})
            if required:
                assert status == 503, answer
                assert "takes no traffic" in note["message"]
            else:
                assert status == 200, answer
                assert note["message"].startswith("FAILOVER TO UNACCEPTED STANDBY")
            logs = gw.process.stdout() + gw.process.stderr()
            assert note["message"] in logs
            assert "dpgate_unaccepted_failover 1" in wait_metrics_line(gw, "dpgate_unaccepted_failover 1")


def test_a_primary_not_probed_yet_is_not_a_failover(tmp_path):
    """At start-up the standby's first probe can land before the primary's.
    Until the primary's first verdict nothing fails over and nothing alarms;
    a primary whose first probe then fails is a real failover, and loud."""
    with Sim() as standby, Sim(fault="hang") as primary:
        backends = [("primary", primary, "primary"), ("standby", standby, "standby")]
        config = gateway_config(backends, acceptance={"dir": str(tmp_path / "acc")},
                                health={"interval_ms": 200, "timeout_ms": 8000, "fall": 1, "rise": 1})
        with Gateway(config, wait_healthy=False) as gw:
            body = wait_status(gw, lambda b: b["backends"][1]["healthy"])
            started = time.monotonic()
            primary_view = body["backends"][0]
            assert primary_view["probed"] is False and primary_view["healthy"] is False, primary_view
            assert body["failover_unaccepted"] is None
            ctl = subprocess.run([str(bin_dir() / "dpgate"), "ctl", "--admin", f"http://127.0.0.1:{gw.admin_port}",
                                  "status"], env={**os.environ, "DPGATE_ADMIN_TOKEN": ADMIN_TOKEN},
                                 capture_output=True, text=True, timeout=30)
            assert "not probed yet" in ctl.stdout, ctl.stdout + ctl.stderr
            status, _, answer = gw.json("POST", "/v1/chat/completions",
                                        {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})
            assert status == 503, answer
            assert standby.stats()["requests"] == 0
            if time.monotonic() - started < 7.0:  # still inside the primary's first probe
                assert "FAILOVER" not in gw.process.stdout() + gw.process.stderr()
            # The primary's first probe times out: now it is down, and the failover is loud.
            body = wait_status(gw, lambda b: b["failover_unaccepted"] is not None, timeout=20.0)
            assert body["backends"][0]["probed"] is True and body["backends"][0]["healthy"] is False
            assert body["failover_unaccepted"]["message"].startswith("FAILOVER TO UNACCEPTED STANDBY")
            status, _, answer = gw.json("POST", "/v1/chat/completions",
                                        {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})
            assert status == 200, answer


def test_the_public_window_stays_at_the_smaller_accepted_window(tmp_path):
    acc = tmp_path / "acc"
    with real_sim() as primary, real_sim() as standby:
        backends = [("primary", primary, "primary"), ("standby", standby, "standby")]
        config = write_config(tmp_path, backends, acceptance={"dir": str(acc)})
        assert accept(config, "standby").returncode == 0
        [record_path] = records(acc)
        record = json.loads(record_path.read_text())
        with Gateway(gateway_config(backends, acceptance={"dir": str(acc)})) as gw:
            wait_status(gw, lambda b: b["public_window"] == 1048576 and b["backends"][1]["accepted"])
            # The standby's only record is at 524288: both report 1M, but the
            # public window stays at what was accepted.
            smaller = dict(record, identity=dict(record["identity"], max_model_len=524288))
            record_path.unlink()
            (acc / "accept-standby-20200101T000000Z.json").write_text(json.dumps(smaller))
            body = wait_status(gw, lambda b: b["public_window"] == 524288)
            assert body["backends"][1]["accepted_window"] == 524288
            assert [b["window"] for b in body["backends"]] == [1048576, 1048576]
            # A new record at the larger window lifts it.
            (acc / "accept-standby-20300101T000000Z.json").write_text(json.dumps(record))
            wait_status(gw, lambda b: b["public_window"] == 1048576)


@pytest.mark.parametrize("key", ["state", "acceptance"])
def test_serve_refuses_to_start_with_a_folder_it_cannot_write(tmp_path, key):
    # Root writes through permission bits: a path below a regular file is
    # one no user can create.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with Sim() as primary:
        config = gateway_config([("primary", primary, "primary")], **{key: {"dir": str(blocker / "records")}})
        with pytest.raises(RuntimeError) as failed:
            Gateway(config)
        assert f"conf: {key}.dir: {blocker / 'records'}: cannot create the folder" in str(failed.value)
        # A missing folder that can be made is made, and written in at the first drain.
        config = gateway_config([("primary", primary, "primary")], **{key: {"dir": str(tmp_path / "new" / "dir")}})
        with Gateway(config):
            assert (tmp_path / "new" / "dir").is_dir()
