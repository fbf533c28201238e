"""Replicas sharing roles through a real 3-member etcd cluster: flips and
drains through any replica reach all of them, racing flips have one
winner, an etcd outage keeps traffic flowing and refuses changes, a new or
restarted replica starts from the shared (or cached) roles, a watch past a
compaction resyncs, and every replica shows the others.

One etcd cluster serves the module (etcd_cluster.py); each test writes
under a prefix of its own. Flips are forced: acceptance records are
test_acceptance.py's subject.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from etcd_cluster import (EtcdCluster, EtcdUnavailable, _distinct_free_ports, etcd, etcd_cluster,  # noqa: F401
                          unique_prefix)
from harness import (ADMIN_TOKEN, MODEL, TOKENIZER, Gateway, Sim, bin_dir, gateway_config, http_request,
                     metric_sample, poll)

CHAT = "/v1/chat/completions"
BODY = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
LEASE_TTL_S = 3


@pytest.fixture(scope="module")
def sims():
    """The two backends every replica of the module fronts; they count
    prompt tokens with the real tokenizer, so `dpgate accept` passes."""
    real = ["--tokenizer", str(TOKENIZER)]
    with Sim(extra_args=real) as primary, Sim(extra_args=real) as standby:
        yield primary, standby


@pytest.fixture
def prefix(request) -> str:
    return unique_prefix(request.node.name)


def replica_config(sims, etcd: EtcdCluster, prefix: str, replica_id: str, state_dir: Path | None = None,
                   **sections) -> dict:
    primary, standby = sims
    control = {"replica_id": replica_id,
               "etcd": {"endpoints": etcd.endpoints if etcd is not None else [], "prefix": prefix, "dial_timeout_ms": 1000,
                        "request_timeout_ms": 2000, "lease_ttl_s": LEASE_TTL_S}}
    if state_dir is not None:
        sections["state"] = {"dir": str(state_dir)}
    return gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")],
                          control=control, **sections)


@contextlib.contextmanager
def replicas(sims, etcd, prefix, ids=("r1", "r2", "r3"), **sections):
    """Gateways with the given replica ids on one prefix, stopped on exit."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(Gateway(replica_config(sims, etcd, prefix, rid, **sections))) for rid in ids]


def status(gw) -> dict:
    code, _, body = gw.admin("GET", "/admin/status", timeout=10)
    assert code == 200, body
    return body


def primary_of(body: dict) -> str | None:
    names = [b["name"] for b in body["backends"] if b["role"] == "primary"]
    return names[0] if len(names) == 1 else None


def drained_of(body: dict) -> set[str]:
    return {b["name"] for b in body["backends"] if b["drained"]}


def route(gw) -> str:
    code, headers, answer = gw.json("POST", CHAT, BODY)
    assert code == 200, answer
    return headers["x-dpgate-route"].split("/")[0]


def flip(gw, expect: str, to: str, by: str = "test"):
    return gw.admin("POST", "/admin/flip", {"expect_primary": expect, "to": to, "force": True, "by": by},
                    timeout=15)


def wait_all(gws, done, timeout: float = 5.0) -> list[dict]:
    """Statuses of every gateway until done(status) holds for all; the last
    ones either way, for the caller's assertion."""
    return poll(lambda: [status(gw) for gw in gws], lambda bodies: all(done(b) for b in bodies), timeout)


def admin_metrics(gw) -> str:
    code, _, data = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert code == 200
    return data.decode()


def shared_state(etcd, prefix) -> dict:
    state = etcd.get_json(prefix + "state")
    assert state is not None, f"no {prefix}state key; keys: {sorted(etcd.range(prefix))}"
    return state


# --------------------------------------------------------------------------


def test_the_etcd_cluster_keeps_its_data_through_member_and_cluster_restarts(etcd):
    assert etcd.startup_seconds < 30
    key = unique_prefix("fixture")
    revision = etcd.put(key + "a", {"n": 1})
    etcd.put(key + "b", b"two")
    assert etcd.get_json(key + "a") == {"n": 1} and etcd.get(key + "missing") is None
    assert sorted(etcd.range(key)) == [key + "a", key + "b"]
    assert etcd.range(key)[key + "a"]["mod_revision"] == revision

    etcd.kill_member(0)  # two of three keep a quorum
    etcd.put(key + "c", "3")
    etcd.start_member(0)
    etcd.kill_all()
    with pytest.raises(EtcdUnavailable):
        etcd.get(key + "a")
    etcd.start_all()
    assert sorted(etcd.range(key)) == [key + "a", key + "b", key + "c"]

    compacted = etcd.compact()
    assert compacted == etcd.revision()
    assert etcd.delete_prefix(key) == 3


def test_a_flip_through_one_replica_reaches_every_replica_within_a_second(sims, etcd, prefix):
    with replicas(sims, etcd, prefix) as gws:
        for gw, body in zip(gws, wait_all(gws, lambda b: b["control"]["reachable"])):
            control = body["control"]
            assert control["store"] == "etcd" and control["reachable"] is True, control
            assert control["source"] == "etcd" and control["endpoints"] == etcd.endpoints, control
            assert control["replica_id"] == gw.config["control"]["replica_id"]
            assert isinstance(control["revision"], int) and control["revision"] > 0, control
            assert control["applied_at"].endswith("Z"), control
            assert primary_of(body) == "primary"

        code, _, body = flip(gws[0], "primary", "standby", by="alice")
        assert code == 200, body
        flipped = time.monotonic()
        seen = {}
        while len(seen) < len(gws) and time.monotonic() - flipped < 5:
            for i, gw in enumerate(gws):
                if i not in seen and primary_of(status(gw)) == "standby":
                    seen[i] = time.monotonic() - flipped
        assert sorted(seen) == [0, 1, 2], f"replicas that saw the flip within 5 s: {seen}"
        assert max(seen.values()) <= 1.0, f"seconds until each replica showed the flip: {seen}"
        for gw in gws:
            assert route(gw) == "standby"

        state = shared_state(etcd, prefix)
        assert state["format"] == "dpgate-state/1" and state["model"] == MODEL, state
        assert sorted(state["backends"]) == ["primary", "standby"]
        assert state["primary"] == "standby" and state["drained"] == [] and state["written_at"].endswith("Z")
        last = state["flips"][0]
        assert (last["who"], last["from"], last["to"], last["forced"]) == ("alice", "primary", "standby", True)
        state_revision = etcd.range(prefix + "state")[prefix + "state"]["mod_revision"]
        for body in wait_all(gws, lambda b: b["control"]["revision"] >= state_revision):
            assert body["control"]["revision"] >= state_revision, body["control"]
            assert body["last_flip"]["who"] == "alice", body["last_flip"]


def test_two_racing_flips_through_two_replicas_have_exactly_one_winner(sims, etcd, prefix):
    with replicas(sims, etcd, prefix) as gws:
        current, other = "primary", "standby"
        for round_index in range(10):
            barrier = threading.Barrier(2)
            results: dict[str, tuple] = {}

            def racer(name, gw):
                barrier.wait()
                results[name] = flip(gw, current, other, by=name)

            threads = [threading.Thread(target=racer, args=(f"racer{i}-{round_index}", gw))
                       for i, gw in enumerate(gws[:2])]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            winners = [name for name, (code, _, _) in results.items() if code == 200]
            assert len(winners) == 1, f"round {round_index}: {results}"
            [loser] = [name for name in results if name not in winners]
            code, _, body = results[loser]
            assert code == 409 and body["error"]["code"] == "flip_refused", (round_index, body)
            message = body["error"]["message"]
            assert re.search(rf"primary is '?{other}\b", message), f"the refusal does not name the primary: {message}"
            assert winners[0] in message, f"the refusal does not name who flipped ({winners[0]}): {message}"

            bodies = wait_all(gws, lambda b: primary_of(b) == other)
            assert [primary_of(b) for b in bodies] == [other] * 3, round_index
            current, other = other, current

        state = shared_state(etcd, prefix)
        assert state["primary"] == current
        flips = state["flips"][:10]
        assert flips, state
        for newer, older in zip(flips, flips[1:]):
            assert newer["from"] == older["to"] and newer["to"] == older["from"], flips


def test_drain_and_undrain_through_any_replica_reach_every_replica(sims, etcd, prefix):
    with replicas(sims, etcd, prefix) as gws:
        code, _, body = gws[1].admin("POST", "/admin/drain/primary")
        assert code == 200, body
        bodies = wait_all(gws, lambda b: drained_of(b) == {"primary"})
        assert [drained_of(b) for b in bodies] == [{"primary"}] * 3
        assert route(gws[0]) == "standby" and route(gws[2]) == "standby"
        assert shared_state(etcd, prefix)["drained"] == ["primary"]

        code, _, body = gws[2].admin("POST", "/admin/undrain/primary")
        assert code == 200, body
        bodies = wait_all(gws, lambda b: drained_of(b) == set())
        assert [drained_of(b) for b in bodies] == [set()] * 3
        assert route(gws[0]) == "primary"
        assert shared_state(etcd, prefix)["drained"] == []
        assert gws[0].admin("POST", "/admin/drain/nope")[0] == 404


def test_an_etcd_outage_serves_traffic_refuses_changes_and_recovers(sims, etcd, prefix):
    with replicas(sims, etcd, prefix) as gws:
        assert flip(gws[0], "primary", "standby")[0] == 200
        wait_all(gws, lambda b: primary_of(b) == "standby")
        for gw in gws:
            assert metric_sample(admin_metrics(gw), "dpgate_control_store_up") == 1

        etcd.kill_all()
        try:
            bodies = wait_all(gws, lambda b: b["control"]["reachable"] is False, timeout=10)
            assert [b["control"]["reachable"] for b in bodies] == [False] * 3, [b["control"] for b in bodies]
            for gw in gws:
                for _ in range(5):
                    assert route(gw) == "standby"
            for gw in gws:
                assert metric_sample(admin_metrics(gw), "dpgate_control_store_up") == 0

            started = time.monotonic()
            code, _, body = flip(gws[1], "standby", "primary")
            assert code == 503 and body["error"]["code"] == "control_store_unavailable", body
            assert time.monotonic() - started < 6, "a refusal should not wait past dial + request timeouts"
            for path in ("/admin/drain/primary", "/admin/undrain/primary"):
                code, _, body = gws[2].admin("POST", path, timeout=15)
                assert code == 503 and body["error"]["code"] == "control_store_unavailable", (path, body)
            assert [primary_of(status(gw)) for gw in gws] == ["standby"] * 3
            assert all(drained_of(status(gw)) == set() for gw in gws)
        finally:
            etcd.start_all()

        bodies = wait_all(gws, lambda b: b["control"]["reachable"] is True, timeout=15)
        assert [b["control"]["reachable"] for b in bodies] == [True] * 3, [b["control"] for b in bodies]
        for gw in gws:
            assert poll(lambda: metric_sample(admin_metrics(gw), "dpgate_control_store_up"), lambda v: v == 1) == 1
        code, _, body = flip(gws[1], "standby", "primary")
        assert code == 200, body
        bodies = wait_all(gws, lambda b: primary_of(b) == "primary")
        assert [primary_of(b) for b in bodies] == ["primary"] * 3
        assert route(gws[2]) == "primary"


def test_a_new_replica_starts_from_the_shared_roles(sims, etcd, prefix):
    with replicas(sims, etcd, prefix, ids=("r1",)) as [first]:
        assert flip(first, "primary", "standby")[0] == 200
        assert first.admin("POST", "/admin/drain/primary")[0] == 200
        # Its config says primary is primary; the shared roles say otherwise,
        # and win from its first answer on.
        late = Gateway(replica_config(sims, etcd, prefix, "r2"), wait_healthy=False)
        try:
            body = status(late)
            assert primary_of(body) == "standby" and drained_of(body) == {"primary"}, body["backends"]
            assert body["control"]["source"] == "etcd", body["control"]
            late.wait_all_healthy()
            assert route(late) == "standby"
        finally:
            late.stop()


def test_a_replica_started_while_etcd_is_down_starts_from_its_cache(sims, etcd, prefix, tmp_path):
    state_dir = tmp_path / "state"
    config = replica_config(sims, etcd, prefix, "r1", state_dir=state_dir)
    with Gateway(config) as gw:
        assert flip(gw, "primary", "standby")[0] == 200
        cached = poll(lambda: (state_dir / "state.json").exists() and json.loads((state_dir / "state.json").read_text()),
                      lambda s: s and s["primary"] == "standby")
        assert cached and cached["primary"] == "standby", cached

    etcd.kill_all()
    try:
        with Gateway(config) as cached_gw, \
                Gateway(replica_config(sims, etcd, prefix, "r2")) as bare_gw:
            body = status(cached_gw)
            assert body["control"]["source"] == "cache" and body["control"]["reachable"] is False, body["control"]
            assert primary_of(body) == "standby"
            assert route(cached_gw) == "standby"
            body = status(bare_gw)
            assert body["control"]["source"] == "config" and primary_of(body) == "primary", body["control"]

            etcd.start_all()
            bodies = wait_all([cached_gw, bare_gw], lambda b: b["control"]["reachable"] and
                              b["control"]["source"] == "etcd" and primary_of(b) == "standby", timeout=15)
            assert [(b["control"]["source"], primary_of(b)) for b in bodies] == [("etcd", "standby")] * 2, \
                [b["control"] for b in bodies]
            assert route(bare_gw) == "standby"
    finally:
        etcd.ensure_running()


def test_a_replica_whose_watch_falls_behind_a_compaction_resyncs(sims, etcd, prefix):
    with replicas(sims, etcd, prefix) as gws:
        behind = gws[2]
        before = status(behind)["control"]["revision"]
        resyncs = metric_sample(admin_metrics(behind), "dpgate_control_resyncs_total")
        os.kill(behind.pid, signal.SIGSTOP)
        try:
            # Every member restarted: the paused replica's watch connection is
            # gone, so it cannot catch up from events already on its socket.
            etcd.kill_all()
            etcd.start_all()
            wait_all(gws[:2], lambda b: b["control"]["reachable"], timeout=15)
            for expect, to in (("primary", "standby"), ("standby", "primary"), ("primary", "standby")):
                code, _, body = flip(gws[0], expect, to)
                assert code == 200, body
            assert gws[1].admin("POST", "/admin/drain/primary")[0] == 200
            compacted = etcd.compact()
            assert compacted > before
        finally:
            os.kill(behind.pid, signal.SIGCONT)
        body = poll(lambda: status(behind),
                    lambda b: primary_of(b) == "standby" and drained_of(b) == {"primary"}
                    and b["control"]["revision"] >= compacted and b["control"]["reachable"], timeout=15)
        assert primary_of(body) == "standby" and drained_of(body) == {"primary"}, body["backends"]
        assert body["control"]["revision"] >= compacted and body["control"]["reachable"], body["control"]
        assert route(behind) == "standby"
        assert metric_sample(admin_metrics(behind), "dpgate_control_resyncs_total") > resyncs


def test_every_replica_lists_the_others_flags_another_config_and_forgets_a_dead_one(sims, etcd, prefix):
    with replicas(sims, etcd, prefix) as gws, \
            Gateway(replica_config(sims, etcd, prefix, "r4", limits={"max_header_count": 77})) as odd:
        def complete(body):
            entries = body.get("replicas") or []
            return (sorted(e["id"] for e in entries) == ["r1", "r2", "r3", "r4"]
                    and all(e["health"] == {"primary": "up", "standby": "up"} for e in entries))

        body = poll(lambda: status(gws[0]), complete, timeout=10)
        by_id = {e["id"]: e for e in body.get("replicas") or []}
        assert sorted(by_id) == ["r1", "r2", "r3", "r4"], body.get("replicas")
        digests = {rid: e["config_digest"] for rid, e in by_id.items()}
        assert digests["r1"] == digests["r2"] == digests["r3"] != digests["r4"], digests
        assert [rid for rid, e in sorted(by_id.items()) if e["other_config"]] == ["r4"], by_id
        assert [rid for rid, e in sorted(by_id.items()) if e["self"]] == ["r1"], by_id
        for rid, e in by_id.items():
            assert e["primary"] == "primary" and sorted(e["backends_up"]) == ["primary", "standby"], e
            assert e["health"] == {"primary": "up", "standby": "up"}, e
            assert e["version"] and isinstance(e["revision"], int) and e["last_seen"], e
            assert e["lagging"] is False, e
        keys = etcd.range(prefix + "replicas/")
        assert sorted(keys) == [prefix + f"replicas/r{i}" for i in range(1, 5)], sorted(keys)
        assert all(kv["lease"] != 0 for kv in keys.values()), "membership keys must live on a lease"

        # A flip shows in every replica's entry.
        assert flip(gws[1], "primary", "standby")[0] == 200
        body = poll(lambda: status(gws[0]),
                    lambda b: all(e["primary"] == "standby" for e in b["replicas"]), timeout=10)
        assert {e["id"]: e["primary"] for e in body["replicas"]} == dict.fromkeys(["r1", "r2", "r3", "r4"],
                                                                                   "standby")

        # Killed without a goodbye: gone once its lease runs out.
        gws[1].process.popen.kill()
        killed = time.monotonic()
        body = poll(lambda: status(gws[0]), lambda b: "r2" not in {e["id"] for e in b["replicas"]},
                    timeout=LEASE_TTL_S + 10)
        gone_after = time.monotonic() - killed
        assert "r2" not in {e["id"] for e in body["replicas"]}, f"r2 still listed {gone_after:.1f} s after kill"
        assert gone_after <= LEASE_TTL_S + 3, f"r2 left the list {gone_after:.1f} s after it was killed"
        assert sorted(e["id"] for e in body["replicas"]) == ["r1", "r3", "r4"]
        assert prefix + "replicas/r2" not in etcd.range(prefix + "replicas/")

        # Stopped cleanly: it gives its lease back and is gone at once.
        gws[2].stop()
        stopped = time.monotonic()
        body = poll(lambda: status(gws[0]), lambda b: "r3" not in {e["id"] for e in b["replicas"]},
                    timeout=LEASE_TTL_S + 10)
        assert sorted(e["id"] for e in body["replicas"]) == ["r1", "r4"], body["replicas"]
        assert time.monotonic() - stopped < LEASE_TTL_S - 1, "a clean stop should not wait for the lease to expire"


def test_an_acceptance_record_written_beside_one_replica_lets_another_flip(sims, etcd, prefix, tmp_path):
    with Gateway(replica_config(sims, etcd, prefix, "r1", acceptance={"dir": str(tmp_path / "acc1")})) as r1, \
            Gateway(replica_config(sims, etcd, prefix, "r2", acceptance={"dir": str(tmp_path / "acc2")})) as r2:
        unforced = {"expect_primary": "primary", "to": "standby", "by": "carol"}
        code, _, body = r2.admin("POST", "/admin/flip", unforced)
        assert code == 409 and "standby is not accepted" in body["error"]["message"], body

        run = subprocess.run([str(bin_dir() / "dpgate"), "accept", "--config", str(r1.config_path),
                              "--backend", "standby"], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        assert list((tmp_path / "acc1").glob("accept-standby-*.json")), "the record is written beside r1"
        body = poll(lambda: status(r2), lambda b: b["backends"][1]["accepted"], timeout=15)
        assert body["backends"][1]["accepted"] is True, body["backends"][1]
        published = etcd.range(prefix + "acceptance/standby/")
        assert len(published) == 1, sorted(published)
        record = json.loads(next(iter(published.values()))["value"])
        assert record["backend"] == "standby" and record["passed"] is True

        code, _, body = r2.admin("POST", "/admin/flip", unforced)
        assert code == 200, body
        assert body["last_flip"]["forced"] is False and body["last_flip"]["who"] == "carol"
        assert poll(lambda: primary_of(status(r1)), lambda p: p == "standby") == "standby"


def test_without_control_the_roles_are_local(sims):
    primary, standby = sims
    with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
        body = status(gw)
        assert body["control"]["store"] == "local", body.get("control")
        assert flip(gw, "primary", "standby")[0] == 200
        assert route(gw) == "standby"


def test_password_authentication_works_and_a_wrong_password_reads_as_down(sims, tmp_path):
    """etcd with authentication on (a cluster of its own: the others run
    without): the right password gives the shared roles; a wrong one
    leaves the replica serving, says why, and refuses flips with 503."""
    cluster = EtcdCluster(tmp_path / "etcd-auth", size=1)
    try:
        etcdctl = ["etcdctl", f"--endpoints={cluster.endpoints[0]}"]
        for argv in (["user", "add", "root:rootpw"], ["user", "grant-role", "root", "root"],
                     ["user", "add", "dpgate:dpw"], ["role", "add", "dpgate"],
                     ["role", "grant-permission", "dpgate", "--prefix=true", "readwrite", "/auth/"],
                     ["user", "grant-role", "dpgate", "dpgate"], ["auth", "enable"]):
            subprocess.run(etcdctl + argv, check=True, capture_output=True, timeout=30)
        (tmp_path / "right").write_text("dpw\n")
        (tmp_path / "wrong").write_text("nope\n")

        def config(replica_id: str, password: str) -> dict:
            cfg = replica_config(sims, cluster, "/auth/", replica_id)
            cfg["control"]["etcd"].update(username="dpgate", password_file=str(tmp_path / password))
            return cfg

        with Gateway(config("good", "right")) as good, Gateway(config("bad", "wrong")) as bad:
            body = poll(lambda: status(good), lambda s: s["control"]["reachable"] and s["replicas"], 10)
            assert body["control"]["source"] == "etcd", body["control"]
            assert [r["id"] for r in body["replicas"]] == ["good"]
            code, _, answer = flip(good, "primary", "standby")
            assert code == 200, answer
            assert primary_of(status(good)) == "standby"

            refused = poll(lambda: status(bad), lambda s: not s["control"]["reachable"], 10)["control"]
            assert "authentication failed" in refused["last_error"], refused
            assert metric_sample(admin_metrics(bad), "dpgate_control_store_up") == 0
            code, _, answer = flip(bad, "primary", "standby")
            assert code == 503 and answer["error"]["code"] == "control_store_unavailable", answer
            assert route(bad) in ("primary", "standby")  # traffic goes on
            time.sleep(1.5)  # a membership round: the wrong password never reads as reachable
            assert not status(bad)["control"]["reachable"]
            assert "control: etcd reachable" not in bad.process.stderr()
    finally:
        cluster.close()


def test_tls_endpoints_verify_etcd_against_the_configured_ca(sims, tmp_path):
    """An https endpoint: dpgate checks etcd's certificate against
    control.etcd.tls.ca_file (its IP in the certificate's names); without
    that CA the handshake fails and the replica says so."""
    import ssl
    import urllib.request

    def openssl(*argv):
        subprocess.run(["openssl", *argv], check=True, capture_output=True, cwd=tmp_path, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=dpgate-test-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "etcd.key", "-out", "etcd.csr", "-subj", "/CN=etcd")
    (tmp_path / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "etcd.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "etcd.pem", "-days", "2", "-extfile", "san.cnf")
    client_port, peer_port = _distinct_free_ports(2)
    url = f"https://127.0.0.1:{client_port}"
    log = open(tmp_path / "etcd.log", "wb")
    etcd_process = subprocess.Popen(
        ["etcd", "--name", "tls", "--data-dir", str(tmp_path / "etcd.data"), "--listen-client-urls", url,
         "--advertise-client-urls", url, "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-cluster", f"tls=http://127.0.0.1:{peer_port}",
         "--cert-file", str(tmp_path / "etcd.pem"), "--key-file", str(tmp_path / "etcd.key")],
        stdout=log, stderr=log)
    try:
        trusted = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))

        def healthy():
            try:
                with urllib.request.urlopen(url + "/health", context=trusted, timeout=2) as answer:
                    return json.load(answer).get("health") == "true"
            except OSError:
                return False
        poll(healthy, bool, 30)

        def config(replica_id: str, ca: bool) -> dict:
            cfg = replica_config(sims, None, "/tls/", replica_id)
            cfg["control"]["etcd"]["endpoints"] = [url]
            if ca:
                cfg["control"]["etcd"]["tls"] = {"ca_file": str(tmp_path / "ca.pem")}
            return cfg

        with Gateway(config("trusting", True)) as trusting, Gateway(config("untrusting", False)) as untrusting:
            body = poll(lambda: status(trusting), lambda s: s["control"]["reachable"] and s["replicas"], 10)
            assert body["control"]["source"] == "etcd", body["control"]
            code, _, answer = flip(trusting, "primary", "standby")
            assert code == 200, answer
            refused = poll(lambda: status(untrusting), lambda s: not s["control"]["reachable"], 10)["control"]
            assert "certificate verify failed" in refused["last_error"], refused
            code, _, answer = flip(untrusting, "standby", "primary")
            assert code == 503 and answer["error"]["code"] == "control_store_unavailable", answer
    finally:
        etcd_process.terminate()
        etcd_process.wait(timeout=10)
        log.close()
