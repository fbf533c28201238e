"""Conversation affinity through real processes: every turn of a
conversation lands on the DP rank that holds its prefix, conversations spread
over the ranks, two gateways agree, and a dying primary costs no request."""

from __future__ import annotations

import threading
import time

from harness import MODEL, Gateway, Sim, gateway_config, open_stream, poll

CHAT = "/v1/chat/completions"
SYSTEM = "You are the coding agent of ACME. " + "Follow the house rules carefully. " * 200


def conversation_turns(user: str, turns: int):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"{user}: first question"}]
    for t in range(turns):
        yield {"model": MODEL, "max_tokens": 4, "messages": list(messages)}
        messages += [{"role": "assistant", "content": f"answer {t} " * 30},
                     {"role": "user", "content": f"{user}: follow-up {t}"}]


def test_a_conversation_stays_on_one_slot_and_its_cache_grows():
    with Sim() as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            routes, cached = [], []
            for body in conversation_turns("alice", 5):
                status, headers, answer = gw.json("POST", CHAT, body)
                assert status == 200, answer
                routes.append(headers["x-dpgate-route"])
                cached.append(answer["usage"]["prompt_tokens_details"]["cached_tokens"])
            assert len(set(routes)) == 1, routes
            assert cached[0] == 0
            assert all(b > a for a, b in zip(cached, cached[1:])), cached


def test_conversations_sharing_a_long_system_prompt_spread_over_all_ranks():
    with Sim() as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            ranks = set()
            for n in range(64):
                body = next(conversation_turns(f"user{n}", 1))
                status, headers, _ = gw.json("POST", CHAT, body)
                assert status == 200
                ranks.add(headers["x-dpgate-route"])
            assert ranks == {f"primary/{r}" for r in range(8)}, ranks


def test_session_header_and_prompt_cache_key_pick_the_slot():
    with Sim() as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            def route(text, headers=None, **extra):
                body = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": text}], **extra}
                return gw.json("POST", CHAT, body, headers=headers)[1]["x-dpgate-route"]

            # Different conversations, one session: one slot.
            assert len({route(f"topic {i}", {"X-Session-ID": "s-1"}) for i in range(10)}) == 1
            assert len({route(f"topic {i}", prompt_cache_key="pck-1") for i in range(10)}) == 1
            # The same name through either channel is the same key.
            assert route("a", {"X-Session-ID": "same"}) == route("b", prompt_cache_key="same")


def test_two_gateways_route_1000_keys_identically():
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")])
        with Gateway(config) as a, Gateway(config) as b:
            body = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
            for i in range(1000):
                key = {"X-Session-ID": f"key-{i}"}
                ra = a.json("POST", CHAT, body, headers=key)[1]["x-dpgate-route"]
                rb = b.json("POST", CHAT, body, headers=key)[1]["x-dpgate-route"]
                assert ra == rb, (i, ra, rb)


def test_primary_killed_under_load_loses_no_non_streamed_request():
    primary = Sim(decode_us_per_token=2000, max_output=4)
    with Sim(decode_us_per_token=2000, max_output=4) as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")],
                                health={"interval_ms": 500, "fall": 3, "rise": 2})
        with Gateway(config) as gw:
            failures, served, stop = [], {"primary": 0, "standby": 0}, threading.Event()
            stream_outcomes = []

            def client(n):
                i = 0
                while not stop.is_set():
                    body = {"model": MODEL, "max_tokens": 4,
                            "messages": [{"role": "user", "content": f"client {n} request {i}"}]}
                    status, headers, answer = gw.json("POST", CHAT, body)
                    if status != 200:
                        failures.append((status, answer))
                    else:
                        served[headers["x-dpgate-route"].split("/")[0]] += 1
                    i += 1

            def streamer():
                body = {"model": MODEL, "max_tokens": 4, "stream": True,
                        "messages": [{"role": "user", "content": "a stream across the failure"}]}
                with open_stream(gw.port, CHAT, body) as resp:
                    events = list(resp.events())
                    stream_outcomes.append((resp.status, resp.complete, events[-1].data if events else None))

            threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
            for t in threads:
                t.start()
            time.sleep(1.0)
            primary.set_fault("slow", chunk_delay_ms=300)  # keep streams in flight on the primary
            streams = [threading.Thread(target=streamer) for _ in range(3)]
            for t in streams:
                t.start()
            time.sleep(0.3)
            primary.process.popen.kill()  # SIGKILL: connections reset mid-answer
            primary.process.popen.wait()
            time.sleep(2.0)
            stop.set()
            for t in threads + streams:
                t.join(30)
            primary.stop()
            assert failures == [], failures[:5]
            assert served["primary"] > 0 and served["standby"] > 0, served
            for status, complete, last in stream_outcomes:
                if status == 200 and not complete:
                    assert last is not None and '"error"' in last, "a broken stream ends with an error event"


def test_new_conversations_avoid_the_rank_that_did_the_recent_prefill_work():
    """A long first prompt makes its rank the busiest of the last minutes:
    new conversations whose rendezvous home is that rank go elsewhere, its
    own next turn stays there (cached), /admin/status shows the recent work,
    and with work_balance_factor 0 the same keys do land on it."""
    def run(work_balance_factor):
        with Sim() as sim:
            config = gateway_config([("primary", sim, "primary")],
                                    routing={"work_balance_factor": work_balance_factor, "work_slack_tokens": 0})
            with Gateway(config) as gw:
                heavy = [{"role": "system", "content": "Read this report. " * 4000},
                         {"role": "user", "content": "summarise it"}]
                status, headers, first = gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1, "messages": heavy})
                assert status == 200, first
                busy = headers["x-dpgate-route"]
                uncached = first["usage"]["prompt_tokens"] - first["usage"]["prompt_tokens_details"]["cached_tokens"]
                # The lease is corrected to the backend's count after the
                # answer is written, maybe on another worker: poll.
                work = poll(lambda: {f"primary/{s['rank']}": s["recent_prefill_tokens"]
                                     for s in gw.admin("GET", "/admin/status")[2]["backends"][0]["slots"]},
                            lambda work: work[busy] >= 0.99 * uncached)
                assert work[busy] >= 0.99 * uncached and uncached > 16_000, (work, uncached)
                assert all(w == 0 for route, w in work.items() if route != busy), work

                routes = []
                for n in range(64):
                    body = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
                    status, headers, _ = gw.json("POST", CHAT, body, headers={"X-Session-ID": f"light-{n}"})
                    assert status == 200
                    routes.append(headers["x-dpgate-route"])
                heavy += [{"role": "assistant", "content": "It is long."}, {"role": "user", "content": "shorter"}]
                status, headers, second = gw.json("POST", CHAT, {"model": MODEL, "max_tokens": 1, "messages": heavy})
                assert status == 200 and headers["x-dpgate-route"] == busy
                assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 16_000
                return busy, routes

    busy, routes = run(1.0)
    assert busy not in routes, routes
    assert len(set(routes)) == 7, sorted(set(routes))  # every other rank still takes new keys
    busy_off, routes_off = run(0)
    assert busy_off == busy  # the heavy conversation's home: the same key, the same slot
    assert routes_off.count(busy) > 0, routes_off
