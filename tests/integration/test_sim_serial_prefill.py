"""dpgate-sim --serial-prefill: each DP rank prefills first come, first
served, so a request's time to first token includes the uncached prefill of
everything ahead of it on its rank. Real processes, wall-clock times: the
bounds are lower bounds the simulator's timers cannot beat, and ratios or
generous ceilings against the alternative being ruled out, so a loaded
2-core machine only makes them easier to meet or leaves ample room.
The queue's arithmetic is unit-tested with a fake clock
(tests/unit/sim/prefill_queue_test.cpp)."""

from __future__ import annotations

import json
import threading
import time

from harness import Sim, metric_sample, open_stream, poll

MODEL = "ds-v4.1-flash-1017"
CHAT = "/v1/chat/completions"
SERIAL = ["--serial-prefill"]


def messages(tag: str, tokens: int) -> list[dict]:
    """One user message of about `tokens` pseudo-tokens (4 bytes each, role
    and newline included) whose first block is unique to `tag`, so it shares
    no cached prefix with another tag's."""
    head = f"{tag:<24}"
    return [{"role": "user", "content": head + "x" * (tokens * 4 - len("user\n") - len(head))}]


def body(msgs: list[dict], stream: bool = True) -> dict:
    return {"model": MODEL, "messages": msgs, "max_tokens": 2, "stream": stream,
            "stream_options": {"include_usage": True}}


class Timed(threading.Thread):
    """Sends one request on its own connection and notes when it was sent,
    when the answer's head arrived (a stream's head leaves before the
    prefill, once the request is queued) and when its first event (a
    stream) or whole answer (not a stream) arrived. close_after: seconds
    after the head at which to hang up instead, or earlier when hang_up is
    set."""

    def __init__(self, sim: Sim, msgs: list[dict], rank: int, stream: bool = True,
                 close_after: float | None = None):
        super().__init__(daemon=True)
        self.sim, self.msgs, self.rank, self.stream, self.close_after = sim, msgs, rank, stream, close_after
        self.sent = self.head_at = self.first = None
        self.usage = None
        self.hang_up = threading.Event()
        self.start()

    def run(self):
        headers = {"X-data-parallel-rank": str(self.rank)}
        self.sent = time.monotonic()
        with open_stream(self.sim.port, CHAT, body(self.msgs, self.stream), headers, timeout=60) as resp:
            self.head_at = time.monotonic()
            assert resp.status == 200
            if self.close_after is not None:
                self.hang_up.wait(self.close_after)
                return
            if not self.stream:
                resp.read()
                self.first = time.monotonic()
                return
            for event in resp.events():
                if self.first is None:
                    self.first = event.at
                if '"prompt_tokens"' in event.data:
                    self.usage = json.loads(event.data)["usage"]

    def wait_head(self) -> float:
        deadline = time.monotonic() + 30
        while self.head_at is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert self.head_at is not None, "no answer head"
        return self.head_at

    @property
    def ttft(self) -> float:
        self.join(60)
        assert self.first is not None, "no answer"
        return self.first - self.sent


def pair(sim: Sim, ranks: tuple[int, int], tag: str, tokens: int = 200_000, gap: float = 0.05,
         second_stream: bool = True) -> tuple[Timed, Timed]:
    first = Timed(sim, messages(tag + "-1", tokens), ranks[0])
    time.sleep(gap)
    second = Timed(sim, messages(tag + "-2", tokens), ranks[1], stream=second_stream)
    first.join(60), second.join(60)
    return first, second


def test_second_request_on_a_rank_waits_for_the_first():
    # 200,000 uncached tokens at 2 us: 0.4 s of prefill each, the second
    # sent 0.05 s after the first.
    with Sim(dp=2, prefill_us_per_token=2, extra_args=SERIAL) as sim:
        first, same = pair(sim, (0, 0), "same")
        _, other = pair(sim, (0, 1), "other")
    with Sim(dp=2, prefill_us_per_token=2) as sim:
        _, unqueued = pair(sim, (0, 0), "off")
    print(f"\nsecond TTFT: same rank {same.ttft:.3f} s, other rank {other.ttft:.3f} s, "
          f"same rank without --serial-prefill {unqueued.ttft:.3f} s")
    # Both prefills, one after the other, from the first's arrival; and the
    # second's own after the first's first token.
    assert same.first - first.sent >= 0.79
    same_gap = same.first - first.first
    assert same_gap >= 0.38
    assert other.ttft >= 0.39 and unqueued.ttft >= 0.39
    # Side by side the first tokens come about the send gap apart.
    assert other.first - other.sent < same.first - same.sent
    assert unqueued.first - unqueued.sent < same.first - same.sent


def test_non_stream_answer_waits_for_the_queue_too():
    with Sim(dp=2, prefill_us_per_token=2, extra_args=SERIAL) as sim:
        first, second = pair(sim, (1, 1), "plain", second_stream=False)
    assert first.ttft >= 0.39
    assert second.first - first.sent >= 0.79
    assert second.first - first.first >= 0.38


def test_cached_prefix_is_not_charged_again():
    with Sim(dp=2, prefill_us_per_token=2, extra_args=SERIAL) as sim:
        history = messages("cached", 200_000)
        single = Timed(sim, history, 0).ttft  # the whole prompt is new: 0.4 s
        # The same conversation one turn later, queued behind a new 200,000
        # token prompt: charged for its new turn only, not 0.4 s again.
        longer = history + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "and then?"}]
        ahead = Timed(sim, messages("ahead", 200_000), 0)
        ahead.wait_head()
        follow_up = Timed(sim, longer, 0)
        ahead.join(60), follow_up.join(60)
        assert follow_up.usage["prompt_tokens_details"]["cached_tokens"] >= 199_000
    after_ahead = follow_up.first - ahead.first
    print(f"\nTTFT: new prompt alone {single:.3f} s; cached follow-up {after_ahead:.3f} s after "
          f"the new prompt ahead of it")
    assert single >= 0.39
    assert ahead.ttft >= 0.39
    assert -0.05 < after_ahead < 0.2  # right behind it; charged in full: 0.4 s


def test_client_leaving_the_queue_frees_the_ones_behind():
    # 900,000 tokens at 2 us: 1.8 s that the one behind must not wait for.
    with Sim(dp=2, prefill_us_per_token=2, extra_args=SERIAL) as sim:
        quitter = Timed(sim, messages("quit", 900_000), 0, close_after=0.3)
        quitter.wait_head()
        time.sleep(0.03)
        behind = Timed(sim, messages("behind", 50_000), 0)  # 0.1 s of its own
        since = behind.ttft + behind.sent - quitter.head_at
        quitter.join(60)
        stats = poll(sim.stats, lambda s: s["in_flight"] == 0)
    print(f"\nbehind a client that left after 0.3 s: first token {since:.3f} s after it was queued")
    assert stats["cancelled"] == 1
    assert since >= 0.39  # 0.3 s of the quitter's, then 0.1 s of its own
    assert since < 1.2  # had the quitter stayed: 1.9 s


def test_waiting_and_queued_tokens_are_visible():
    # 200,000 tokens at 10 us: 2 s each, time enough to look.
    with Sim(dp=2, prefill_us_per_token=10, extra_args=SERIAL) as sim:
        streams = []
        for i in range(3):
            streams.append(Timed(sim, messages(f"seen-{i}", 200_000), 0, close_after=30))
            streams[-1].wait_head()
        stats = sim.stats()
        page = sim.request("GET", "/metrics")[2].decode()
        assert stats["waiting_by_rank"] == [2, 0] and stats["running_by_rank"] == [1, 0]
        queued = stats["queued_prefill_tokens_by_rank"]
        assert 400_000 < queued[0] <= 600_000 and queued[1] == 0
        assert metric_sample(page, "vllm:num_requests_waiting", engine="0") == 2
        assert metric_sample(page, "vllm:num_requests_running", engine="0") == 1
        assert metric_sample(page, "vllm:num_requests_waiting", engine="1") == 0
        # The queued tokens drain as the first prefills.
        later = poll(sim.stats, lambda s: s["queued_prefill_tokens_by_rank"][0] < queued[0] - 20_000)
        assert later["queued_prefill_tokens_by_rank"][0] < queued[0] - 20_000
        # Clients hanging up, queued or prefilling, leave no trace.
        for stream in streams:
            stream.hang_up.set()
        stats = poll(sim.stats, lambda s: s["in_flight"] == 0)
        page = sim.request("GET", "/metrics")[2].decode()
        assert stats["cancelled"] == 3
        assert stats["waiting_by_rank"] == [0, 0] and stats["running_by_rank"] == [0, 0]
        assert stats["queued_prefill_tokens_by_rank"] == [0, 0]
        assert metric_sample(page, "vllm:num_requests_waiting", engine="0") == 0
        assert metric_sample(page, "vllm:num_requests_running", engine="0") == 0


def test_budget_shares_the_last_step_and_finishes_a_step_after_an_abort():
    # --max-batched-tokens 200000 at 2 us: steps of at most 0.4 s.
    args = SERIAL + ["--max-batched-tokens", "200000"]
    with Sim(dp=2, prefill_us_per_token=2, extra_args=args) as sim:
        # 300,000 tokens: one full step alone, then its last 100,000 share a
        # step with 100,000 of the next request, so its first token comes
        # after 0.8 s, not after the 0.6 s of its own tokens.
        first, second = pair(sim, (0, 0), "chunked", tokens=300_000)
        # An abort takes effect between steps: the quitter's first step
        # (0.4 s) runs to its end although it leaves after 0.1 s.
        quitter = Timed(sim, messages("quit", 900_000), 1, close_after=0.1)
        quitter.wait_head()
        behind = Timed(sim, messages("behind", 10_000), 1)  # 0.02 s of its own
        since = behind.ttft + behind.sent - quitter.head_at
        quitter.join(60)
    print(f"\nbudget 200000: first TTFT {first.ttft:.3f} s, second {second.ttft:.3f} s; behind a client "
          f"that left after 0.1 s: {since:.3f} s after it was queued")
    assert first.ttft >= 0.79
    assert second.first - first.sent >= 1.19  # all 600,000 tokens
    assert since >= 0.3  # without a budget: 0.12 s
    assert since < 1.2  # had the quitter stayed: 1.82 s
