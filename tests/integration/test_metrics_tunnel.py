"""GET /metrics on the client port, for operators who reach dpgate only
through the users' tunnel: a key with `metrics: true` reads every backend's
vLLM series (labelled backend="<name>") and then dpgate's own; any other
caller is refused. Real processes: two simulated 8-engine backends (a
primary and a standby: both are scraped)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from harness import CLIENT_KEY, Gateway, Sim, gateway_config, http_request
from harness import metric_sample as sample

METRICS_KEY = "sk-metrics-scraper"
ENGINES = 8


def tunnel_config(backends, **sections) -> dict:
    keys = [{"name": "local-demo", "key": CLIENT_KEY},
            {"name": "scraper", "key": METRICS_KEY, "metrics": True}]
    auth = {"required": True, "keys": keys, **sections.pop("auth", {})}
    return gateway_config(backends, auth=auth, **sections)


def scrape(gw: Gateway, key: str | None = METRICS_KEY, method: str = "GET"):
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return http_request(gw.port, method, "/metrics", headers)


def engines_of(page: str, backend: str, family: str = "vllm:num_requests_running") -> set[str]:
    pattern = re.escape(family) + r'\{backend="' + re.escape(backend) + r'",engine="(\d+)"'
    return set(re.findall(pattern, page))


def check_with_promtool(page: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    result = subprocess.run([promtool, "check", "metrics"], input=page.encode(), capture_output=True)
    # vLLM's names hold ':', which promtool's linter flags (exit 3) although
    # the format allows it; anything else is a failure, and a parse error exits 1.
    problems = [l for l in (result.stdout + result.stderr).decode().splitlines() if l.strip()]
    assert result.returncode in (0, 3), problems
    assert all("should not contain ':'" in p for p in problems), problems


def error_of(body: bytes) -> dict:
    return json.loads(body)["error"]


def test_a_metrics_key_reads_every_backends_series_then_dpgates():
    with Sim(dp=ENGINES) as a, Sim(dp=ENGINES) as b, \
            Gateway(tunnel_config([("alpha", a, "primary"), ("beta", b, "standby")])) as gw:
        assert gw.json("POST", "/v1/chat/completions",
                       {"model": a.model, "max_tokens": 2,
                        "messages": [{"role": "user", "content": "hi"}]})[0] == 200
        status, headers, raw = scrape(gw)
        assert status == 200, raw
        assert headers["content-type"].startswith("text/plain; version=0.0.4")
        page = raw.decode()
        check_with_promtool(page)
        for backend in ("alpha", "beta"):
            for family in ("vllm:num_requests_running", "vllm:prompt_tokens_total", "vllm:prefix_cache_hits_total"):
                assert engines_of(page, backend, family) == {str(e) for e in range(ENGINES)}, (backend, family)
            assert sample(page, "dpgate_backend_metrics_up", backend=backend) == 1
        # One HELP and TYPE per family, its samples together: beta's follow alpha's.
        assert page.count("# TYPE vllm:num_requests_running gauge") == 1
        running = [l for l in page.splitlines() if l.startswith("vllm:num_requests_running{")]
        assert [l.split('"')[1] for l in running] == ["alpha"] * ENGINES + ["beta"] * ENGINES
        # The backends' series first, then dpgate's own page.
        last_vllm = max(i for i, l in enumerate(page.splitlines()) if l.startswith("vllm:"))
        first_dpgate = min(i for i, l in enumerate(page.splitlines()) if l.startswith("dpgate_"))
        assert last_vllm < first_dpgate
        assert sample(page, "dpgate_requests_total", endpoint="/v1/chat/completions", code="200") == 1
        assert sample(page, "dpgate_backend_up", backend="alpha", role="primary") == 1

        # HEAD is GET without the body.
        status, headers, raw = scrape(gw, method="HEAD")
        assert status == 200 and raw == b""


def test_other_callers_are_refused():
    with Sim(dp=ENGINES) as a, Gateway(tunnel_config([("alpha", a, "primary")])) as gw:
        status, headers, raw = scrape(gw, key=None)
        assert status == 401 and headers["www-authenticate"] == "Bearer", raw
        assert error_of(raw)["code"] == "invalid_api_key"
        status, headers, raw = scrape(gw, key="sk-wrong")
        assert status == 401 and headers["www-authenticate"] == "Bearer", raw

        # A right key that does not say metrics: true.
        status, _, raw = scrape(gw, key=CLIENT_KEY)
        assert status == 403, raw
        error = error_of(raw)
        assert (error["type"], error["code"]) == ("permission_error", "metrics_not_allowed")
        assert "metrics: true" in error["message"] and "local-demo" in error["message"]

        assert scrape(gw, method="POST")[0] == 405
        # The key's answer is not the admin token's: the admin port still wants its own.
        assert http_request(gw.admin_port, "GET", "/metrics", {"Authorization": f"Bearer {METRICS_KEY}"})[0] == 401


def test_a_key_is_needed_even_where_keys_are_optional_and_metrics_off_is_404():
    with Sim(dp=ENGINES) as a, \
            Gateway(tunnel_config([("alpha", a, "primary")], auth={"required": False},
                                  metrics={"enabled": False})) as gw:
        assert gw.json("GET", "/v1/models", headers={"Authorization": ""})[0] == 200  # keyless is fine there
        assert scrape(gw, key=None)[0] == 401
        assert scrape(gw, key=CLIENT_KEY)[0] == 403
        status, _, raw = scrape(gw)
        assert status == 404, raw
        assert error_of(raw)["code"] == "metrics_disabled"


def test_a_backend_that_is_down_is_missing_and_reported():
    with Sim(dp=ENGINES) as a:
        b = Sim(dp=ENGINES)
        try:
            with Gateway(tunnel_config([("alpha", a, "primary"), ("beta", b, "standby")])) as gw:
                b.stop()
                status, _, raw = scrape(gw)
                assert status == 200, raw
                page = raw.decode()
                check_with_promtool(page)
                assert engines_of(page, "alpha") == {str(e) for e in range(ENGINES)}
                assert 'backend="beta",engine=' not in page
                assert sample(page, "dpgate_backend_metrics_up", backend="alpha") == 1
                assert sample(page, "dpgate_backend_metrics_up", backend="beta") == 0
        finally:
            if b.process.alive():
                b.stop()
