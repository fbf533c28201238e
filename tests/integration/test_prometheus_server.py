"""A real Prometheus server (Debian's /usr/bin/prometheus) scrapes dpgate's
admin /metrics with the admin token, and answers the per-rank cache hit ratio
query after a scripted conversation with the same value dpgate itself
reports."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

from harness import ADMIN_TOKEN, MODEL, Gateway, Process, Sim, free_port, gateway_config, http_request
from harness import metric_sample as sample

PROMETHEUS = Path("/usr/bin/prometheus")
CHAT = "/v1/chat/completions"
JOB = "dpgate"
HIT_RATIO = ("sum by (backend,rank) (dpgate_cached_prompt_tokens_total)"
             " / sum by (backend,rank) (dpgate_prompt_tokens_total)")

pytestmark = pytest.mark.skipif(not PROMETHEUS.exists(),
                                reason="/usr/bin/prometheus missing (Debian package `prometheus`; scripts/setup)")

def prometheus_config(target: str, token: str | None, credentials_file: Path | None = None) -> dict:
    """One job scraping dpgate's /metrics every second (JSON is YAML;
    scrape_timeout must not exceed scrape_interval), with a bearer token
    given inline or in a file."""
    job = {"job_name": JOB, "metrics_path": "/metrics", "static_configs": [{"targets": [target]}]}
    if token is not None:
        job["authorization"] = {"type": "Bearer", "credentials": token}
    elif credentials_file is not None:
        job["authorization"] = {"type": "Bearer", "credentials_file": str(credentials_file)}
    return {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [job]}


class Prometheus:
    """A Prometheus server on an ephemeral port, its TSDB in a temp folder."""

    def __init__(self, target: str, token: str | None = ADMIN_TOKEN, timeout: float = 20.0,
                 credentials_file: Path | None = None):
        self._dir = Path(tempfile.mkdtemp(prefix="dpgate-prom-"))
        config = prometheus_config(target, token, credentials_file)
        (self._dir / "prometheus.yml").write_text(json.dumps(config, indent=2))
        # Prometheus has no port file: a port free a moment ago, and a retry
        # if someone took it meanwhile.
        for attempt in range(3):
            self.port = free_port()
            self.process = Process([PROMETHEUS, f"--config.file={self._dir / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={self._dir / 'data'}",
                                    f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                                   self._dir, f"prometheus{attempt}")
            if self._wait_ready(timeout):
                return
            if "address already in use" not in self.process.stderr():
                raise RuntimeError("prometheus did not become ready:\n" + self.process.describe())
            self.process.stop()
        raise RuntimeError("prometheus found no free port")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.process.alive():
                return False
            try:
                if http_request(self.port, "GET", "/-/ready", timeout=2)[0] == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def query(self, promql: str) -> list[dict]:
        path = "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        status, _, body = http_request(self.port, "GET", path, timeout=5)
        answer = json.loads(body)
        assert status == 200 and answer["status"] == "success", (status, answer)
        return answer["data"]["result"]

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "Prometheus":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()




def dpgate_page(gw: Gateway) -> str:
    status, _, raw = http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200
    return raw.decode()


def test_prometheus_scrapes_dpgate_and_computes_the_per_rank_cache_hit_ratio():
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")])) as gw, \
            Prometheus(f"127.0.0.1:{gw.admin_port}") as prom:
        # A scripted multi-turn conversation: one session, so every turn lands
        # on one rank and each turn's prompt extends the previous one's.
        messages = [{"role": "system", "content": "You are terse. " * 100},
                    {"role": "user", "content": "first question"}]
        routes = set()
        turns = 5
        for turn in range(turns):
            body = {"model": MODEL, "max_tokens": 3, "messages": messages, "stream": turn % 2 == 1,
                    "stream_options": {"include_usage": True}}
            status, headers, _ = gw.request("POST", CHAT, body, {"X-Session-ID": "prometheus-conversation"})
            assert status == 200
            routes.add(headers["x-dpgate-route"])
            messages = messages + [{"role": "assistant", "content": f"answer {turn}"},
                                   {"role": "user", "content": f"question {turn}"}]
        assert len(routes) == 1, routes
        backend, rank = routes.pop().split("/")

        # dpgate counts a request when its relay ends, which may be just after
        # the client has the answer: read its page once every turn is in.
        deadline = time.monotonic() + 5
        while sample(page := dpgate_page(gw), "dpgate_requests_total", endpoint=CHAT, code="200") < turns:
            assert time.monotonic() < deadline, "not every turn was counted by dpgate"
            time.sleep(0.05)
        prompt = sample(page, "dpgate_prompt_tokens_total", backend=backend, rank=rank)
        cached = sample(page, "dpgate_cached_prompt_tokens_total", backend=backend, rank=rank)
        assert prompt > 0 and 0 < cached < prompt, (prompt, cached)
        expected = cached / prompt

        # Poll until a scrape taken after the conversation is the newest sample.
        deadline = time.monotonic() + 15
        while True:
            by_slot = {(r["metric"].get("backend"), r["metric"].get("rank")): float(r["value"][1])
                       for r in prom.query(HIT_RATIO)}
            got = by_slot.get((backend, rank))
            if got is not None and math.isclose(got, expected, rel_tol=1e-12):
                break
            assert time.monotonic() < deadline, \
                f"Prometheus says {got} for {backend}/{rank}, dpgate's own page {cached}/{prompt} = {expected}"
            time.sleep(0.25)
        assert got > 0
        # Every other rank served nothing: no tokens, so 0/0 (NaN) or no series.
        for (b, r), value in by_slot.items():
            if (b, r) != (backend, rank):
                assert math.isnan(value), (b, r, value)

        up = prom.query(f'up{{job="{JOB}"}}')
        assert [float(r["value"][1]) for r in up] == [1.0], up
        # The scrape went through the admin token: dpgate answered 200 to it.
        assert prom.query(f'scrape_samples_scraped{{job="{JOB}"}} > 0'), "Prometheus scraped no samples"


def test_prometheus_without_the_admin_token_sees_the_target_down():
    """The same scrape job minus the token: dpgate refuses it, so `up` is 0.
    Proves the passing test above depends on the token being sent."""
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")])) as gw:
        with Prometheus(f"127.0.0.1:{gw.admin_port}", token=None) as prom:
            deadline = time.monotonic() + 10
            while not (up := prom.query(f'up{{job="{JOB}"}}')):
                assert time.monotonic() < deadline, "Prometheus never scraped"
                time.sleep(0.25)
            assert [float(r["value"][1]) for r in up] == [0.0], up


def test_prometheus_scrapes_the_client_port_with_a_metrics_key(tmp_path):
    """Through the users' tunnel: the client port's /metrics with a key that
    has `metrics: true`, read from a file as an operator would keep it.
    Prometheus stores the backend's vLLM series under backend="primary"
    and dpgate's own beside them."""
    key_file = tmp_path / "metrics-key"
    key_file.write_text("sk-metrics-scraper\n")
    keys = [{"name": "scraper", "key": "sk-metrics-scraper", "metrics": True}]
    with Sim() as sim, Gateway(gateway_config([("primary", sim, "primary")],
                                              auth={"required": True, "keys": keys})) as gw, \
            Prometheus(f"127.0.0.1:{gw.port}", token=None, credentials_file=key_file) as prom:
        deadline = time.monotonic() + 15
        while not (running := prom.query(f'vllm:num_requests_running{{job="{JOB}",backend="primary"}}')):
            assert time.monotonic() < deadline, "Prometheus stored no vLLM series from the client port"
            time.sleep(0.25)
        assert {r["metric"]["engine"] for r in running} == {str(e) for e in range(sim.dp)}
        up = prom.query(f'dpgate_backend_metrics_up{{job="{JOB}"}}')
        assert [(r["metric"]["backend"], float(r["value"][1])) for r in up] == [("primary", 1.0)]
        assert prom.query(f'dpgate_public_window_tokens{{job="{JOB}"}}'), "dpgate's own series are missing"
        assert [float(r["value"][1]) for r in prom.query(f'up{{job="{JOB}"}}')] == [1.0]
