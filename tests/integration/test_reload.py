"""Config reload (POST /admin/reload and SIGHUP): a valid file is swapped in,
an invalid one is refused with its error and the running config stays, and
reloading under load fails no request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

from harness import ADMIN_TOKEN, MODEL, Gateway, Sim, bin_dir, gateway_config, http_json, poll

CHAT = "/v1/chat/completions"


def ask(gw, max_tokens):
    body = {"model": MODEL, "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hi"}]}
    return gw.json("POST", CHAT, body)


def rewrite(gw, config):
    gw.config_path.write_text(json.dumps(config, indent=2))


def test_reload_applies_a_new_output_limit_and_refuses_bad_files():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")])
        with Gateway(config) as gw:
            assert ask(gw, 2000)[0] == 200
            config["model"]["max_output_tokens"] = 1000
            rewrite(gw, config)
            status, _, body = gw.admin("POST", "/admin/reload")
            assert status == 200, body
            status, _, body = ask(gw, 2000)
            assert status == 400 and body["error"]["param"] == "max_tokens", body

            # A broken file: 400 naming key and line; the running config stays.
            gw.config_path.write_text(gw.config_path.read_text().replace('"max_output_tokens": 1000',
                                                                         '"max_output_tokens": "lots"'))
            status, _, body = gw.admin("POST", "/admin/reload")
            assert status == 400 and body["error"]["code"] == "reload_refused"
            assert "model.max_output_tokens" in body["error"]["message"] and "line" in body["error"]["message"]
            assert ask(gw, 2000)[0] == 400 and ask(gw, 500)[0] == 200

            # What needs a restart is refused, by name.
            moved = json.loads(json.dumps(config))
            moved["backends"][0]["url"] = "http://127.0.0.1:1"
            rewrite(gw, moved)
            status, _, body = gw.admin("POST", "/admin/reload")
            assert status == 400 and "backends[0]" in body["error"]["message"], body
            # The heap's pages were chosen at start.
            small_pages = json.loads(json.dumps(config))
            small_pages["huge_pages"] = False
            rewrite(gw, small_pages)
            status, _, body = gw.admin("POST", "/admin/reload")
            assert status == 400 and "huge_pages" in body["error"]["message"], body


def test_sighup_reloads_keys(tmp_path):
    keys = tmp_path / "keys.yaml"
    keys.write_text("")
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], auth={"required": True, "keys_file": str(keys)})
        with Gateway(config) as gw:
            out = subprocess.run([str(bin_dir() / "dpgate"), "keys", "add", "late-comer", "--file", str(keys)],
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            new_key = out.stdout.strip()
            body = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
            headers = {"Authorization": f"Bearer {new_key}"}
            assert http_json(gw.port, "POST", CHAT, body, headers)[0] == 401
            os.kill(gw.pid, signal.SIGHUP)
            deadline = time.monotonic() + 5
            while http_json(gw.port, "POST", CHAT, body, headers)[0] != 200:
                assert time.monotonic() < deadline, "the new key never worked after SIGHUP"
                time.sleep(0.05)


def test_reloading_under_load_fails_no_request():
    with Sim(decode_us_per_token=1000, max_output=4) as sim:
        config = gateway_config([("primary", sim, "primary")])
        with Gateway(config) as gw:
            failures, done, stop = [], [0], threading.Event()

            def client(n):
                i = 0
                while not stop.is_set():
                    status, _, answer = ask(gw, 4)
                    if status != 200:
                        failures.append((status, answer))
                    done[0] += 1
                    i += 1

            threads = [threading.Thread(target=client, args=(n,)) for n in range(6)]
            for t in threads:
                t.start()
            for i in range(20):
                config["limits"] = {"header_timeout_ms": 10000 + i}
                rewrite(gw, config)
                status, _, body = gw.admin("POST", "/admin/reload")
                assert status == 200, body
                time.sleep(0.05)
            stop.set()
            for t in threads:
                t.join(30)
            assert failures == [], failures[:3]
            assert done[0] > 50


def test_a_reload_that_would_leave_no_keys_is_refused_unless_allowed(tmp_path):
    keys = tmp_path / "keys.yaml"
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], auth={"required": True, "keys_file": str(keys),
                                                                     "keys": []})
        out = subprocess.run([str(bin_dir() / "dpgate"), "keys", "add", "alice", "--file", str(keys)],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        headers = {"Authorization": f"Bearer {out.stdout.strip()}"}
        body = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
        with Gateway(config) as gw:
            assert http_json(gw.port, "POST", CHAT, body, headers)[0] == 200
            keys.write_text("")  # every key removed
            status, _, answer = gw.admin("POST", "/admin/reload")
            assert status == 400 and answer["error"]["code"] == "reload_refused", answer
            assert "no client keys" in answer["error"]["message"]
            assert "--allow-no-keys" in answer["error"]["message"]
            # SIGHUP cannot say it means it: refused, logged, alice still served.
            os.kill(gw.pid, signal.SIGHUP)
            assert "reload refused" in poll(lambda: gw.process.stderr() + gw.process.stdout(),
                                            lambda text: "reload refused" in text)
            assert http_json(gw.port, "POST", CHAT, body, headers)[0] == 200

            run = subprocess.run([str(bin_dir() / "dpgate"), "ctl", "--admin", f"http://127.0.0.1:{gw.admin_port}",
                                  "reload", "--allow-no-keys"], capture_output=True, text=True, timeout=30,
                                 env={**os.environ, "DPGATE_ADMIN_TOKEN": ADMIN_TOKEN})
            assert run.returncode == 0, run.stdout + run.stderr
            assert http_json(gw.port, "POST", CHAT, body, headers)[0] == 401
            # The revocation is a warning naming the key.
            log = gw.process.stderr() + gw.process.stdout()
            assert "client keys 1 -> 0; revoked: alice" in log, log


def test_a_reload_names_the_keys_it_revokes(tmp_path):
    keys = tmp_path / "keys.yaml"
    for name in ("alice", "bob"):
        out = subprocess.run([str(bin_dir() / "dpgate"), "keys", "add", name, "--file", str(keys)],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")], auth={"required": True, "keys_file": str(keys)})
        with Gateway(config) as gw:
            out = subprocess.run([str(bin_dir() / "dpgate"), "keys", "remove", "bob", "--file", str(keys)],
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            status, _, answer = gw.admin("POST", "/admin/reload")
            assert status == 200, answer
            log = gw.process.stderr() + gw.process.stdout()
            assert "client keys 3 -> 2; revoked: bob" in log, log


def test_a_reload_that_grows_the_relay_buffer_relays_large_answers_whole():
    # The worker keeps spare relay buffers between requests: after a reload
    # that grows limits.relay_buffer_bytes, a buffer of the old size must
    # not be handed out for the new one (an answer read into it would
    # overrun it; the sanitizer builds report that).
    with Sim(max_output=4000, decode_us_per_token=0) as sim:
        config = gateway_config([("primary", sim, "primary")], threads=1,
                                limits={"relay_buffer_bytes": 2048})
        with Gateway(config) as gw:
            for _ in range(3):
                status, _, body = ask(gw, 4000)
                assert status == 200, body
            small_answer = body["choices"][0]["message"]["content"]
            assert len(small_answer) > 2048 * 4
            config["limits"]["relay_buffer_bytes"] = 1 << 20
            rewrite(gw, config)
            status, _, body = gw.admin("POST", "/admin/reload")
            assert status == 200, body
            for _ in range(3):
                status, _, body = ask(gw, 4000)
                assert status == 200, body
                assert body["usage"]["completion_tokens"] == 4000
                assert len(body["choices"][0]["message"]["content"]) == len(small_answer)
