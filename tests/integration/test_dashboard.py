"""deploy/grafana/dpgate.json and deploy/prometheus/prometheus.yml against
what dpgate actually exports.

Every metric named in a dashboard expression must be a family GatewayMetrics
declares (histogram series via _bucket/_sum/_count of a histogram family).
The exported names and types come from the `dpgate-metrics-names --render`
binary, not from a copy of the list.
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dpgate.json"
PROMETHEUS_CONFIG = REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml"

PROMQL_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                   "group_right", "offset", "bool", "inf", "nan"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def names_binary() -> Path:
    candidates = []
    if os.environ.get("DPGATE_BIN_DIR"):
        candidates.append(Path(os.environ["DPGATE_BIN_DIR"]) / "dpgate-metrics-names")
    candidates.append(REPO_ROOT / "build" / "bin" / "dpgate-metrics-names")
    candidates += sorted(REPO_ROOT.glob("build*/bin/dpgate-metrics-names"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    pytest.fail("dpgate-metrics-names not built: cmake --build build --target dpgate-metrics-names")


def exported_families() -> dict[str, str]:
    """name -> type, from the rendered page's # TYPE lines."""
    page = subprocess.run([names_binary(), "--render"], check=True, capture_output=True, text=True).stdout
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", page, re.M))
    names = subprocess.run([names_binary()], check=True, capture_output=True, text=True).stdout.split()
    assert sorted(names) == sorted(types), "names list and rendered page disagree"
    return types


def metric_names(expr: str) -> set[str]:
    """Metric names used by a PromQL expression (no full parser: strings,
    matchers, ranges and grouping label lists are removed, then every bare
    identifier that is not a function call or a keyword is a metric)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w:.$])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", e):
        ident, call = m.group(1), m.group(2)
        if call or ident.lower() in PROMQL_KEYWORDS:
            continue
        names.add(ident)
    return names


def family_of(name: str, types: dict[str, str]) -> str | None:
    if name in types:
        return name
    for suffix in HISTOGRAM_SUFFIXES:
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) == "histogram":
            return base
    return None


def dashboard_exprs() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if "expr" in t:
                    out.append((p.get("title", "?"), t["expr"]))
            walk(p.get("panels", []))  # rows

    walk(dash.get("panels", []))
    return out


def test_extractor_on_known_shapes():
    assert metric_names('histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="y,z"}[5m])))') == {"a_bucket"}
    assert metric_names("rate(a_sum[$__rate_interval]) / on(job) group_left(rank) rate(b_count[1m])") == {"a_sum", "b_count"}
    assert metric_names('max by (backend, role) (up) and x offset 5m') == {"up", "x"}
    assert metric_names('sum(rate(x_total{reason=~"a|rate(b)"}[5m])) > 0.5e3') == {"x_total"}


def test_family_of_rejects_histogram_suffix_on_counter():
    types = {"c_total": "counter", "h_seconds": "histogram"}
    assert family_of("h_seconds_bucket", types) == "h_seconds"
    assert family_of("c_total_bucket", types) is None
    assert family_of("nope", types) is None


def test_every_dashboard_metric_is_exported():
    types = exported_families()
    exprs = dashboard_exprs()
    assert len(exprs) >= 6
    unknown = [(title, name) for title, expr in exprs for name in metric_names(expr) if family_of(name, types) is None]
    assert unknown == [], f"dashboard names metrics dpgate does not export: {unknown}"


def test_dashboard_covers_the_issue_panels():
    used = {family_of(n, exported_families()) for _, e in dashboard_exprs() for n in metric_names(e)}
    for family in ("dpgate_cached_prompt_tokens_total", "dpgate_prompt_tokens_total",
                   "dpgate_time_to_first_byte_seconds", "dpgate_inflight_requests",
                   "dpgate_admission_rejections_total", "dpgate_backend_up", "dpgate_public_window_tokens"):
        assert family in used, family
    exprs = " ".join(e for _, e in dashboard_exprs())
    assert "histogram_quantile(0.5," in exprs and "histogram_quantile(0.99," in exprs


def test_prometheus_config_is_valid(tmp_path):
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(promtool).exists():
        pytest.skip("promtool absent")
    token = tmp_path / "token"
    token.write_text("t\n")
    text = PROMETHEUS_CONFIG.read_text()
    assert "credentials_file: /etc/prometheus/dpgate_admin_token" in text
    for path in ("/metrics", "/backends/primary/metrics", "/backends/standby/metrics"):
        assert f"metrics_path: {path}\n" in text
    config = tmp_path / "prometheus.yml"
    config.write_text(text.replace("/etc/prometheus/dpgate_admin_token", str(token)))
    result = subprocess.run([promtool, "check", "config", config], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
