"""The operators' API on the admin listener: status, guarded flip, drain."""

from __future__ import annotations

import time

from harness import MODEL, Gateway, Sim, gateway_config

CHAT = "/v1/chat/completions"
BODY = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}


def backend_of(gw) -> str:
    status, headers, answer = gw.json("POST", CHAT, BODY)
    assert status == 200, answer
    return headers["x-dpgate-route"].split("/")[0]


def test_status_shows_backends_roles_windows_and_eight_slots_each():
    with Sim() as primary, Sim() as standby:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            status, _, body = gw.admin("GET", "/admin/status")
            assert status == 200
            assert body["model"] == MODEL and body["public_window"] == 1048576
            assert [(b["name"], b["role"], b["healthy"], b["window"]) for b in body["backends"]] == [
                ("primary", "primary", True, 1048576), ("standby", "standby", True, 1048576)]
            assert [s["rank"] for s in body["backends"][0]["slots"]] == list(range(8))


def test_status_shows_each_backends_own_view_of_its_eight_ranks():
    with Sim() as primary, Sim() as standby:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            # Two turns of one conversation: the second finds the first's prefix.
            messages = [{"role": "system", "content": "Be brief. " * 200}, {"role": "user", "content": "one"}]
            status, headers, _ = gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1, "messages": messages})
            assert status == 200
            messages += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "two"}]
            assert gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1, "messages": messages})[0] == 200
            backend, rank = headers["x-dpgate-route"].split("/")
            time.sleep(1.1)  # the table is fetched at most once a second
            body = gw.admin("GET", "/admin/status")[2]
            by_name = {b["name"]: b for b in body["backends"]}
            assert by_name["standby"]["backend_metrics"]["error"] is None
            slots = by_name[backend]["slots"]
            assert [s["rank"] for s in slots] == list(range(8))
            for slot in slots:
                assert slot["running"] == 0 and slot["waiting"] == 0
            assert 0 < slots[int(rank)]["prefix_cache_hit_ratio"] < 1
            assert all(s["prefix_cache_hit_ratio"] is None for s in slots if s["rank"] != int(rank))

            # A backend that is down shows why its table is missing, and
            # status still answers at once.
            standby.stop()
            deadline = time.monotonic() + 10
            while gw.admin("GET", "/admin/status")[2]["backends"][1]["healthy"]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(1.1)
            started = time.monotonic()
            body = gw.admin("GET", "/admin/status")[2]
            assert time.monotonic() - started < 1
            assert body["backends"][1]["backend_metrics"]["error"] == "backend is not healthy"
            assert all(s["running"] is None for s in body["backends"][1]["slots"])


def test_flip_is_refused_when_the_standby_reports_a_smaller_window():
    with Sim() as primary, Sim(window=524288) as standby:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            status, _, body = gw.admin("POST", "/admin/flip")
            assert status == 409, body
            assert body["error"]["code"] == "flip_refused"
            assert "standby reports window 524288, public window is 1048576" in body["error"]["message"]
            assert backend_of(gw) == "primary"
            roles = {b["name"]: b["role"] for b in gw.admin("GET", "/admin/status")[2]["backends"]}
            assert roles == {"primary": "primary", "standby": "standby"}


def test_flip_is_refused_when_the_standby_is_down():
    standby = Sim()
    with Sim() as primary:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            standby.stop()
            status, _, body = gw.admin("POST", "/admin/flip")
            assert status == 409 and "not healthy" in body["error"]["message"], body
            assert backend_of(gw) == "primary"


def test_flip_moves_traffic_and_keeps_the_old_primary_as_standby():
    # Forced: these backends have no acceptance records (test_acceptance.py
    # covers flips guarded by records).
    with Sim() as primary, Sim() as standby:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            assert backend_of(gw) == "primary"
            status, _, body = gw.admin("POST", "/admin/flip")
            assert status == 409 and "standby is not accepted" in body["error"]["message"], body
            status, _, body = gw.admin("POST", "/admin/flip", {"force": True})
            assert status == 200, body
            roles = {b["name"]: b["role"] for b in body["backends"]}
            assert roles == {"primary": "standby", "standby": "primary"}
            assert backend_of(gw) == "standby"
            # And back.
            assert gw.admin("POST", "/admin/flip?to=primary", {"force": True})[0] == 200
            assert backend_of(gw) == "primary"


def test_flip_names_the_primary_it_expects_and_is_refused_when_that_is_not_so():
    with Sim() as primary, Sim() as standby:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            status, _, body = gw.admin("POST", "/admin/flip", {"expect_primary": "standby", "to": "standby"})
            assert status == 409, body
            assert body["error"]["code"] == "flip_refused"
            assert "the primary is 'primary', not 'standby' as expected" in body["error"]["message"]
            assert backend_of(gw) == "primary"

            for bad in ({"to": 5}, {"expect_primary": None}, {"other": "x"}, ["standby"], {"force": "yes"},
                        {"by": 1}):
                status, _, body = gw.admin("POST", "/admin/flip", bad)
                assert status == 400 and body["error"]["code"] == "invalid_flip_request", (bad, body)
            assert backend_of(gw) == "primary"

            flip = {"expect_primary": "primary", "to": "standby", "force": True}
            status, _, body = gw.admin("POST", "/admin/flip", flip)
            assert status == 200, body
            assert {b["name"]: b["role"] for b in body["backends"]} == {"primary": "standby", "standby": "primary"}
            assert backend_of(gw) == "standby"
            # The same request again names a primary that no longer is.
            status, _, body = gw.admin("POST", "/admin/flip", flip)
            assert status == 409 and "the primary is 'standby'" in body["error"]["message"]


def test_drain_and_undrain():
    with Sim() as primary, Sim() as standby:
        with Gateway(gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])) as gw:
            assert gw.admin("POST", "/admin/drain/primary")[0] == 200
            assert backend_of(gw) == "standby"
            assert gw.admin("POST", "/admin/drain/standby")[0] == 200
            status, _, body = gw.json("POST", CHAT, BODY)
            assert status == 503 and body["error"]["code"] == "backend_unavailable"
            assert gw.admin("POST", "/admin/undrain/primary")[0] == 200
            assert backend_of(gw) == "primary"
            assert gw.admin("POST", "/admin/drain/nope")[0] == 404
