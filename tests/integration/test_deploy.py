"""deploy/: the systemd unit, the container files and the Kubernetes
manifests, checked without a container engine or a cluster.

- the unit: `systemd-analyze verify` (with the built binary in place of
  /usr/local/bin/dpgate) and `systemd-analyze security` under 2.0;
- every config in deploy/ (the systemd one, the ConfigMap's) passes
  `dpgate check`;
- every manifest parses as YAML, and the pieces fit: names, labels, ports,
  probes, mounts, the security context and the image's user; the etcd
  StatefulSet's members are the ones the ConfigMap's control.etcd names;
- the container files are linted: stages on Debian 12, runtime packages
  that are exactly what the built binary links, a non-root user;
- the health probes' shell commands run against a real dpgate.

systemd-analyze, python3-yaml and bash come from scripts/setup; a missing one
fails these tests rather than skipping them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import TOKENIZER, REPO_ROOT, Gateway, Sim, bin_dir, gateway_config

try:
    import yaml
except ImportError:  # scripts/setup installs python3-yaml
    yaml = None

DEPLOY = REPO_ROOT / "deploy"
UNIT = DEPLOY / "systemd" / "dpgate.service"
CONTAINERFILE = DEPLOY / "container" / "Containerfile"
MODEL_CONTAINERFILE = DEPLOY / "container" / "Containerfile.model"
KUBERNETES = DEPLOY / "kubernetes"
INSTALLED_BINARY = "/usr/local/bin/dpgate"
MODEL_DIR = "/opt/dpgate/model"
# In debian:12 and debian:12-slim already.
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}
# Linked by the sanitizer builds scripts/test also runs these tests with.
SANITIZER_PACKAGES = {"libasan8", "libubsan1", "libtsan2"}


def need_yaml():
    if yaml is None:
        pytest.fail("python3-yaml is missing: run scripts/setup")
    return yaml


def tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found: run scripts/setup")
    return found


# --------------------------------------------------------------------------
# systemd


def unit_entries(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) in order; keys may repeat (SystemCallFilter=)."""
    entries, section = [], ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        entries.append((section, key.strip(), value.strip()))
    return entries


def verify_unit(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "dpgate.service"
    path.write_text(text)
    return subprocess.run([tool("systemd-analyze"), "verify", str(path)], capture_output=True, text=True, timeout=60)


def test_the_unit_verifies_with_the_built_binary_in_place(tmp_path):
    text = UNIT.read_text()
    # verify checks that each Exec binary exists: the built one stands in.
    assert [k for _, k, v in unit_entries(text) if v.startswith(INSTALLED_BINARY + " ")] == ["ExecStartPre", "ExecStart"]
    out = verify_unit(tmp_path, text.replace(INSTALLED_BINARY, str(bin_dir() / "dpgate")))
    # verify exits 0 on warnings (an unknown key is "ignoring"); none is allowed.
    assert out.returncode == 0 and out.stderr == "" and out.stdout == "", out

    # The same check sees a mistake: a misspelt value and an unknown key.
    broken = text.replace("Restart=on-failure", "Restart=sometimes").replace("[Install]", "Bogus=1\n[Install]")
    out = verify_unit(tmp_path, broken.replace(INSTALLED_BINARY, str(bin_dir() / "dpgate")))
    assert "sometimes" in out.stderr and "Bogus" in out.stderr, out


def test_the_unit_runs_dpgate_as_its_own_user_with_the_issues_hardening():
    entries = unit_entries(UNIT.read_text())
    service = {}
    for section, key, value in entries:
        if section == "Service":
            service.setdefault(key, []).append(value)
    one = {k: v[-1] for k, v in service.items()}
    config = "--config /etc/dpgate/dpgate.yaml"
    assert one["ExecStartPre"] == f"{INSTALLED_BINARY} check {config}"
    assert one["ExecStart"] == f"{INSTALLED_BINARY} serve {config}"
    assert one["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert one["Restart"] == "on-failure"
    assert one["User"] == "dpgate" and one.get("Group") == "dpgate"
    for key, value in {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "StateDirectory": "dpgate",
                       "PrivateTmp": "yes", "ProtectHome": "yes", "CapabilityBoundingSet": "",
                       "AmbientCapabilities": "", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX"}.items():
        assert one.get(key) == value, key
    # Two descriptors per relayed request: far above the default 1,024.
    assert int(one["LimitNOFILE"]) >= 65536
    # The drain (30 s by default) fits in the stop timeout.
    assert int(one["TimeoutStopSec"].rstrip("s")) > 30
    assert ("Install", "WantedBy", "multi-user.target") in entries


def test_the_units_exposure_stays_ok(tmp_path):
    path = tmp_path / "dpgate.service"
    path.write_text(UNIT.read_text().replace(INSTALLED_BINARY, str(bin_dir() / "dpgate")))
    # --threshold is the exposure level x 10: "OK" is below 2.0.
    out = subprocess.run([tool("systemd-analyze"), "security", "--offline=yes", "--threshold=20", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr


# --------------------------------------------------------------------------
# Configs: each passes `dpgate check` as written, its secrets beside it and
# the tokenizer path pointed at the test's tokenizer.


def dpgate_check(tmp_path: Path, config_text: str) -> subprocess.CompletedProcess:
    assert f"{MODEL_DIR}/tokenizer.json" in config_text
    (tmp_path / "dpgate.yaml").write_text(config_text.replace(f"{MODEL_DIR}/tokenizer.json", str(TOKENIZER)))
    (tmp_path / "admin-token").write_text("a-test-admin-token\n")
    etcd = (need_yaml().safe_load(config_text).get("control") or {}).get("etcd") or {}
    if "password_file" in etcd:
        assert not etcd["password_file"].startswith("/"), "relative to the config, as the Secret's other files"
        password = tmp_path / etcd["password_file"]
        password.parent.mkdir(parents=True, exist_ok=True)
        password.write_text("a-test-etcd-password\n")
    keys = tmp_path / "keys.yaml"
    keys.write_text("")
    add = subprocess.run([str(bin_dir() / "dpgate"), "keys", "add", "alice", "--file", str(keys)],
                         capture_output=True, text=True, timeout=30)
    assert add.returncode == 0, add
    return subprocess.run([str(bin_dir() / "dpgate"), "check", "--config", str(tmp_path / "dpgate.yaml")],
                          capture_output=True, text=True, timeout=60)


def test_the_systemd_config_passes_dpgate_check(tmp_path):
    text = (DEPLOY / "systemd" / "dpgate.yaml").read_text()
    out = dpgate_check(tmp_path, text)
    assert out.returncode == 0, out
    assert "ok (2 backends, window 1048576)" in out.stdout
    config = need_yaml().safe_load(text)
    # Loopback only: clients and operators come in by SSH tunnel.
    assert config["listen"]["address"] == "127.0.0.1" and config["admin"]["address"] == "127.0.0.1"

    # And a mistake in it is refused, naming the key.
    out = dpgate_check(tmp_path, text.replace("mode: failover", "mode: sometimes"))
    assert out.returncode != 0 and "routing.mode" in out.stderr, out


# --------------------------------------------------------------------------
# Kubernetes


def manifests() -> dict[str, list[dict]]:
    y = need_yaml()
    found = {}
    for path in sorted(KUBERNETES.glob("*.yaml")):
        docs = [d for d in y.safe_load_all(path.read_text()) if d is not None]
        assert docs, f"{path} is empty"
        found[path.name] = docs
    return found


def by_kind(app: str = "dpgate") -> dict[str, dict]:
    """The objects of one app (app.kubernetes.io/name: dpgate, or etcd),
    at most one of each kind; every object is dpgate's or part of it."""
    kinds = {}
    for name, docs in manifests().items():
        for doc in docs:
            assert {"apiVersion", "kind"} <= doc.keys(), name
            if doc["kind"] == "Kustomization":
                continue
            labels = doc["metadata"]["labels"]
            assert labels["app.kubernetes.io/name"] == "dpgate" or labels.get("app.kubernetes.io/part-of") == "dpgate", name
            if labels["app.kubernetes.io/name"] != app:
                continue
            assert doc["kind"] not in kinds, f"two {app} {doc['kind']}s"
            kinds[doc["kind"]] = doc
    return kinds


def test_every_manifest_parses_and_kustomize_lists_all_but_the_secret():
    found = manifests()
    kustomization = found.pop("kustomization.yaml")[0]
    assert sorted(kustomization["resources"]) == sorted(n for n in found if n != "secret.yaml")
    assert {d["kind"] for docs in found.values() for d in docs} == {
        "ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget", "StatefulSet"}
    assert set(by_kind("etcd")) == {"Service", "StatefulSet", "PodDisruptionBudget"}


def test_the_deployment_fits_the_config_the_secret_the_service_and_the_image():
    kinds = by_kind()
    deployment, service, pdb = kinds["Deployment"], kinds["Service"], kinds["PodDisruptionBudget"]
    configmap, secret = kinds["ConfigMap"], kinds["Secret"]
    config = need_yaml().safe_load(configmap["data"]["dpgate.yaml"])
    spec = deployment["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # A drain of a node leaves a replica serving.
    assert 1 <= pdb["spec"]["minAvailable"] < spec["replicas"]

    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["serve", "--config", "/etc/dpgate/dpgate.yaml"]
    assert pod["initContainers"][0]["args"] == ["check", "--config", "/etc/dpgate/dpgate.yaml"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": config["listen"]["port"]}
    assert config["listen"]["address"] == "0.0.0.0"

    # The Service publishes the client port only; the admin listener stays
    # on the pod's loopback and in no Service.
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(8900, "http")]
    assert config["admin"]["address"] == "127.0.0.1"
    assert config["admin"]["port"] not in {p["port"] for p in service["spec"]["ports"]}

    # Readiness: the client /health; liveness: the admin /health, from inside.
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    liveness = " ".join(container["livenessProbe"]["exec"]["command"])
    assert f"/dev/tcp/127.0.0.1/{config['admin']['port']}" in liveness and "GET /health " in liveness

    # Replicas route alike only without the per-replica work balancing.
    if spec["replicas"] > 1:
        assert config["routing"]["work_balance_factor"] == 0

    # The config's relative paths meet the Secret's files in one projected folder.
    (config_volume,) = [v for v in pod["volumes"] if v["name"] == "config"]
    sources = config_volume["projected"]["sources"]
    cm_items = {i["path"] for s in sources if "configMap" in s for i in s["configMap"]["items"]}
    secret_items = {i["path"] for s in sources if "secret" in s for i in s["secret"]["items"]}
    assert {s["configMap"]["name"] for s in sources if "configMap" in s} == {configmap["metadata"]["name"]}
    assert {s["secret"]["name"] for s in sources if "secret" in s} == {secret["metadata"]["name"]}
    assert cm_items == set(configmap["data"]) == {"dpgate.yaml"}
    secret_paths = {i["key"]: i["path"] for s in sources if "secret" in s for i in s["secret"]["items"]}
    assert set(secret_paths) == set(secret["stringData"])
    assert secret_items == {config["admin"]["token_file"], config["auth"]["keys_file"],
                            config["control"]["etcd"]["password_file"]}
    # The Secret ships empty: applied as is, no well-known token guards anything.
    assert all(v == "" for v in secret["stringData"].values())
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/dpgate"]["name"] == "config" and mounts["/etc/dpgate"]["readOnly"] is True
    assert "/var/lib/dpgate" in mounts
    # The tokenizer is baked into the image (Containerfile.model), not mounted.
    assert config["model"]["tokenizer"].startswith(MODEL_DIR + "/")
    assert MODEL_DIR not in mounts and "dpgate-model" in container["image"]

    # Non-root, as the image's user; nothing writable but the state volume.
    user = containerfile_stages(CONTAINERFILE)[-1].user
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}" == user
    for c in [container, *pod["initContainers"]]:
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
    # SIGTERM drains for up to 30 s before the kill.
    assert pod["terminationGracePeriodSeconds"] > 30


def test_the_configmaps_config_passes_dpgate_check(tmp_path):
    text = by_kind()["ConfigMap"]["data"]["dpgate.yaml"]
    out = dpgate_check(tmp_path, text)
    assert out.returncode == 0, out
    assert "ok (2 backends, window 1048576)" in out.stdout

    # The control section is read, not passed over: a bad endpoint is refused by name.
    endpoint = need_yaml().safe_load(text)["control"]["etcd"]["endpoints"][0]
    out = dpgate_check(tmp_path, text.replace(endpoint, "etcd-0:2379", 1))
    assert out.returncode != 0 and "control.etcd.endpoints" in out.stderr, out


def test_the_etcd_members_are_the_ones_the_config_names():
    etcd, dpgate = by_kind("etcd"), by_kind()
    service, statefulset, pdb = etcd["Service"], etcd["StatefulSet"], etcd["PodDisruptionBudget"]
    config = need_yaml().safe_load(dpgate["ConfigMap"]["data"]["dpgate.yaml"])
    spec, pod = statefulset["spec"], statefulset["spec"]["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    name, domain, members = statefulset["metadata"]["name"], service["metadata"]["name"], spec["replicas"]

    # A headless Service gives each member a stable name, published before
    # it is ready (readiness needs a quorum, a quorum needs the names).
    assert spec["serviceName"] == domain
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= labels.items()
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        "client": (2379, "client"), "peer": (2380, "peer")}
    # Three members keep a quorum through the loss of one; all start at once.
    assert members == 3 and spec["podManagementPolicy"] == "Parallel"
    assert members - pdb["spec"]["maxUnavailable"] >= members // 2 + 1

    (container,) = pod["containers"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"client": 2379, "peer": 2380}
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["ETCD_NAME"] == "$(POD_NAME)"
    # The initial cluster is exactly the StatefulSet's pods, by their stable names.
    peers = [f"{name}-{i}=http://{name}-{i}.{domain}:2380" for i in range(members)]
    assert env["ETCD_INITIAL_CLUSTER"].split(",") == peers
    assert env["ETCD_INITIAL_ADVERTISE_PEER_URLS"] == f"http://$(POD_NAME).{domain}:2380"
    assert env["ETCD_ADVERTISE_CLIENT_URLS"] == f"http://$(POD_NAME).{domain}:2379"
    assert env["ETCD_LISTEN_CLIENT_URLS"].endswith(":2379") and env["ETCD_LISTEN_PEER_URLS"].endswith(":2380")
    assert env["ETCD_INITIAL_CLUSTER_STATE"] == "new"
    assert env["ETCD_AUTO_COMPACTION_MODE"] in {"periodic", "revision"}

    # Ready: etcd's /health on the client port.
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "client"}
    # The data on the claim each member keeps across restarts.
    (claim,) = spec["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["ETCD_DATA_DIR"].startswith(mounts[claim["metadata"]["name"]] + "/")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False

    # dpgate's endpoints are every member's client URL, and its etcd
    # password is the Secret's item where password_file points.
    control = config["control"]["etcd"]
    assert control["endpoints"] == [f"http://{name}-{i}.{domain}:2379" for i in range(members)]
    assert control["prefix"].startswith("/") and control["prefix"].endswith("/")
    assert control["username"]
    (config_volume,) = [v for v in dpgate["Deployment"]["spec"]["template"]["spec"]["volumes"]
                        if v["name"] == "config"]
    projected = {i["path"]: i["key"] for s in config_volume["projected"]["sources"] if "secret" in s
                 for i in s["secret"]["items"]}
    assert projected[control["password_file"]] in dpgate["Secret"]["stringData"]


# --------------------------------------------------------------------------
# Container files: linted, not built (no engine here).


class Stage:
    def __init__(self, base: str, name: str | None, default_base: str):
        self.base, self.name = base, name
        self.default_base = default_base  # base with the ARGs before the first FROM at their defaults
        self.instructions: list[tuple[str, str]] = []

    @property
    def user(self) -> str | None:
        users = [arg for op, arg in self.instructions if op == "USER"]
        return users[-1] if users else None

    def args(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]

    def apt_packages(self) -> set[str]:
        packages = set()
        for run in self.args("RUN"):
            for part in re.split(r"&&|;", run):
                words = part.split()
                if "apt-get" in words and "install" in words:
                    packages |= {w for w in words[words.index("install") + 1:] if not w.startswith("-")}
        return packages


def containerfile_stages(path: Path) -> list[Stage]:
    """Stages in order, each with its (INSTRUCTION, arguments) after line continuations."""
    logical, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or not line:
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert pending == "", "a continuation runs off the end"
    stages: list[Stage] = []
    global_args: dict[str, str] = {}
    for line in logical:
        op, _, arg = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            words = arg.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            default = re.sub(r"\$\{(\w+)\}", lambda m: global_args.get(m.group(1), m.group(0)), words[0])
            stages.append(Stage(words[0], name, default))
        elif stages:
            stages[-1].instructions.append((op, arg.strip()))
        else:
            assert op == "ARG", f"{op} before the first FROM"
            key, _, value = arg.strip().partition("=")
            global_args[key] = value
    return stages


def setup_packages() -> set[str]:
    text = (REPO_ROOT / "scripts" / "setup").read_text()
    block = re.search(r"^packages=\((.*?)^\)", text, re.S | re.M).group(1)
    return {w for line in block.splitlines() for w in line.split("#")[0].split()}


def linked_packages(binary: Path) -> set[str]:
    """The Debian packages holding the shared libraries `binary` links."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
    packages = set()
    for path in re.findall(r"=> (/\S+)", out):
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True, text=True)
        if owner.returncode != 0:
            owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
        assert owner.returncode == 0, f"no package holds {path}"
        packages.add(owner.stdout.split(":")[0])
    return packages


def test_the_containerfile_builds_on_debian_12_and_runs_only_the_runtime_as_non_root():
    text = CONTAINERFILE.read_text()
    assert "NOT BUILT BY THE TESTS" in text
    stages = containerfile_stages(CONTAINERFILE)
    assert len(stages) >= 2, "multi-stage"
    for stage in stages:
        # A build argument may name another base (scripts/container-check
        # makes one); by default it is Debian 12's image.
        assert re.fullmatch(r"debian:(12|bookworm)(-slim)?", stage.default_base), stage.default_base
    build, runtime = stages[0], stages[-1]
    assert any("scripts/build" in run for run in build.args("RUN"))
    # What the builder installs is what scripts/setup installs for the build.
    assert build.apt_packages() <= setup_packages(), build.apt_packages() - setup_packages()

    # Runtime: exactly the packages of the libraries the built binary links
    # (plus CA certificates for https backends), no build tools.
    linked = linked_packages(bin_dir() / "dpgate")
    if linked & SANITIZER_PACKAGES:
        return  # a sanitizer build links its own allocator; the release run checks the image's binary
    assert runtime.apt_packages() == (linked - BASE_IMAGE_PACKAGES) | {"ca-certificates"}, linked
    for package in runtime.apt_packages():
        assert not package.endswith("-dev") and package not in {"g++", "gcc", "cmake", "ninja-build", "make"}
    assert any(arg.startswith(f"--from={build.name} ") for arg in runtime.args("COPY"))

    user = runtime.user
    assert user and re.fullmatch(r"\d+:\d+", user) and not user.startswith("0:"), user
    (healthcheck,) = runtime.args("HEALTHCHECK")
    assert "/health" in healthcheck
    assert json.loads(runtime.args("ENTRYPOINT")[0]) == [INSTALLED_BINARY]
    assert json.loads(runtime.args("CMD")[0]) == ["serve", "--config", "/etc/dpgate/dpgate.yaml"]

    ignore = [line for line in (DEPLOY / "container" / "Containerfile.dockerignore").read_text().splitlines()
              if line and not line.startswith("#")]
    # Host build trees, npm folders and history stay out; of local/, only the
    # served model's tokenizer goes in (the PGO training counts with it).
    assert {"build", "build-*", "local/*", ".git", "npm/node_modules"} <= set(ignore)
    assert [line for line in ignore if line.startswith("!")] == ["!local/tokenizer", "!local/tokenizer/deepseek-v3"]


def test_the_model_containerfile_only_adds_the_tokenizer_files():
    (stage,) = containerfile_stages(MODEL_CONTAINERFILE)
    assert stage.base == "${DPGATE_IMAGE}"
    assert stage.instructions == [("COPY", f"tokenizer.json tokenizer_config.json {MODEL_DIR}/")]
    assert "NOT BUILT BY THE TESTS".lower() in MODEL_CONTAINERFILE.read_text().lower()


# --------------------------------------------------------------------------
# The probes' shell commands, run against a real dpgate.


def healthcheck_command() -> list[str]:
    (healthcheck,) = containerfile_stages(CONTAINERFILE)[-1].args("HEALTHCHECK")
    exec_form = healthcheck[healthcheck.index("CMD ") + 4:]
    return json.loads(exec_form)


def liveness_command() -> list[str]:
    (container,) = by_kind()["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container["livenessProbe"]["exec"]["command"]


def run_probe(command: list[str], port_from: int, port_to: int) -> int:
    tool("bash")
    target = f"/dev/tcp/127.0.0.1/{port_from}"
    assert sum(target in part for part in command) == 1, command
    command = [part.replace(target, f"/dev/tcp/127.0.0.1/{port_to}") for part in command]
    return subprocess.run(command, capture_output=True, timeout=30).returncode


def test_the_probes_commands_tell_a_serving_dpgate_from_one_without_backends():
    with Sim() as primary, Sim() as standby:
        config = gateway_config([("primary", primary, "primary"), ("standby", standby, "standby")])
        with Gateway(config) as gw:
            assert run_probe(healthcheck_command(), 8900, gw.port) == 0
            assert run_probe(liveness_command(), 8901, gw.admin_port) == 0
            primary.stop()
            standby.stop()
            gw.wait_health(503)
            # Not ready (no backend), yet alive: no restart would help.
            assert run_probe(healthcheck_command(), 8900, gw.port) != 0
            assert run_probe(liveness_command(), 8901, gw.admin_port) == 0
        # Nothing listening: both fail.
        assert run_probe(healthcheck_command(), 8900, gw.port) != 0
        assert run_probe(liveness_command(), 8901, gw.admin_port) != 0
