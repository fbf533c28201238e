"""dpgate's own /metrics and the proxied backend /metrics, after a scripted
conversation, through the real processes."""

from __future__ import annotations

import re
import shutil
import subprocess
import time


from harness import MODEL, Gateway, Sim, gateway_config, http_request
from harness import metric_sample as sample

CHAT = "/v1/chat/completions"




def test_metrics_count_requests_refusals_and_per_rank_cache():
    with Sim() as sim:
        with Gateway(gateway_config([("primary", sim, "primary")])) as gw:
            messages = [{"role": "system", "content": "You are terse. " * 100},
                        {"role": "user", "content": "first question"}]
            routes = set()
            for turn in range(4):
                body = {"model": MODEL, "max_tokens": 3, "messages": messages, "stream": turn % 2 == 1,
                        "stream_options": {"include_usage": True}}
                status, headers, _ = gw.request("POST", CHAT, body)
                assert status == 200
                routes.add(headers["x-dpgate-route"])
                messages = messages + [{"role": "assistant", "content": f"answer {turn}"},
                                       {"role": "user", "content": f"question {turn}"}]
            assert len(routes) == 1
            backend, rank = routes.pop().split("/")
            assert gw.json("POST", CHAT, {"model": "nope", "messages": [{"role": "user", "content": "x"}]})[0] == 404

            # A request is counted when its relay finishes, which may be just
            # after the client has its answer: scrape until the last one lands.
            deadline = time.monotonic() + 5
            while True:
                status, headers, raw = http_request(gw.admin_port, "GET", "/metrics",
                                                    {"Authorization": "Bearer admin-dpgate-local"})
                page = raw.decode()
                if sample(page, "dpgate_requests_total", endpoint=CHAT, code="200") >= 4:
                    break
                assert time.monotonic() < deadline, "the fourth request was never counted"
                time.sleep(0.02)
            assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
            assert sample(page, "dpgate_requests_total", endpoint=CHAT, code="200") == 4
            assert sample(page, "dpgate_admission_rejections_total", reason="model_not_found") == 1
            prompt = sample(page, "dpgate_prompt_tokens_total", backend=backend, rank=rank)
            cached = sample(page, "dpgate_cached_prompt_tokens_total", backend=backend, rank=rank)
            assert prompt > 0 and 0 < cached < prompt, (prompt, cached)
            assert sample(page, "dpgate_completion_tokens_total", backend=backend, rank=rank) == 12
            assert sample(page, "dpgate_time_to_first_byte_seconds_count") == 4
            assert sample(page, "dpgate_backend_up", backend="primary", role="primary") == 1
            assert sample(page, "dpgate_public_window_tokens") == 1048576
            if shutil.which("promtool"):
                check = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, text=True)
                assert check.returncode == 0, check.stdout + check.stderr

            status, _, raw = http_request(gw.admin_port, "GET", "/backends/primary/metrics",
                                          {"Authorization": "Bearer admin-dpgate-local"})
            assert status == 200
            engines = set(re.findall(r'vllm:prefix_cache_hits_total\{[^}]*engine="(\d)"', raw.decode()))
            assert engines == {str(r) for r in range(8)}
            assert http_request(gw.admin_port, "GET", "/backends/nope/metrics",
                                {"Authorization": "Bearer admin-dpgate-local"})[0] == 404


def test_the_usage_of_an_answer_over_the_relays_copy_is_read_from_its_end():
    # 200,000 tokens of answer: about 1.2 MB, past the relay's 1 MiB copy,
    # of which only the end is kept (the usage is there).
    tokens = 200_000
    with Sim(max_output=tokens, prefill_us_per_token=0, decode_us_per_token=0) as sim:
        config = gateway_config([("primary", sim, "primary")], model={"max_output_tokens": tokens})
        with Gateway(config) as gw:
            body = {"model": MODEL, "max_tokens": tokens, "messages": [{"role": "user", "content": "write"}]}
            status, headers, raw = gw.request("POST", CHAT, body)
            assert status == 200, raw[:300]
            assert len(raw) > 1 << 20
            backend, rank = headers["x-dpgate-route"].split("/")
            deadline = time.monotonic() + 5
            while True:
                _, _, page = http_request(gw.admin_port, "GET", "/metrics",
                                          {"Authorization": "Bearer admin-dpgate-local"})
                completion = sample(page.decode(), "dpgate_completion_tokens_total", backend=backend, rank=rank)
                if completion or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            assert completion == tokens
