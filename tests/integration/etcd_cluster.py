"""A real etcd cluster on loopback for the control-plane tests: three
members (by default) on free client and peer ports, data in a folder the
caller owns, each member's output in files, never a pipe.

    cluster = EtcdCluster(tmp_path / "etcd")
    cluster.put("/k", b"v"); cluster.get("/k")
    cluster.kill_all(); cluster.start_all()
    cluster.close()

Reads and writes go through etcd's JSON gateway (/v3/kv/range and friends,
keys and values in base64), to whichever member answers first, as a
client with every endpoint does. `etcd_cluster` is a module-scoped fixture
that stops every member however the module ends; `etcd` hands it to a test
with every member running.

Standard library only (plus pytest for the fixtures).
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import signal
import time
import uuid
from pathlib import Path
from typing import Sequence

import pytest

from harness import Process, free_port, http_request

# etcd's defaults (heartbeat 100 ms, election 1 s): shorter elections flap on
# a shared 2-CPU machine while the gateways under test are busy.
HEARTBEAT_MS = 100
ELECTION_MS = 1000


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _prefix_end(prefix: bytes) -> bytes:
    """The range_end that makes a range read every key starting with `prefix`
    (etcd's clientv3.GetPrefixRangeEnd)."""
    end = bytearray(prefix)
    for i in reversed(range(len(end))):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\0"


def _distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class EtcdUnavailable(RuntimeError):
    """No member answered a request."""


class EtcdMember:
    """One member: its ports, its data folder, its current process (None
    while stopped). Each start logs to files of its own (etcd-1.start2.stderr)."""

    def __init__(self, name: str, client_port: int, peer_port: int, data_dir: Path, log_dir: Path):
        self.name = name
        self.client_port = client_port
        self.peer_port = peer_port
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.process: Process | None = None
        self.starts = 0

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def running(self) -> bool:
        return self.process is not None and self.process.alive()

    def start(self, initial_cluster: str, token: str) -> None:
        if self.running():
            return
        self.starts += 1
        # With a data folder from an earlier start, etcd ignores the
        # --initial-* flags and rejoins with what it saved.
        argv = ["etcd", "--name", self.name, "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", initial_cluster, "--initial-cluster-token", token,
                "--initial-cluster-state", "new",
                "--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_MS),
                "--logger", "zap", "--log-outputs", "stderr"]
        self.process = Process(argv, self.log_dir, f"{self.name}.start{self.starts}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Ends the member with `sig` (SIGKILL: no goodbye to its peers) and
        waits for it; SIGKILL after `timeout`."""
        if self.process is None:
            return
        popen = self.process.popen
        if popen.poll() is None:
            popen.send_signal(sig)
            try:
                popen.wait(timeout)
            except Exception:
                popen.kill()
                popen.wait()
        self.process.stop()
        self.process = None

    def healthy(self, timeout: float = 1.0) -> bool:
        """GET /health says true: the member is part of a cluster with a leader."""
        if not self.running():
            return False
        try:
            status, _, data = http_request(self.client_port, "GET", "/health", timeout=timeout)
        except OSError:
            return False
        if status != 200:
            return False
        try:
            return json.loads(data).get("health") == "true"
        except ValueError:
            return False

    def logs(self) -> str:
        if self.process is None:
            return f"{self.name}: not running"
        return f"--- {self.name} ---\n{self.process.describe()[-6000:]}"


class EtcdCluster:
    """`size` etcd members on loopback, started and healthy on return."""

    def __init__(self, base_dir: Path, size: int = 3, start_timeout: float = 60.0):
        if shutil.which("etcd") is None:
            raise RuntimeError("etcd is not on PATH: these tests start a real cluster (Debian etcd-server)")
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.token = f"dpgate-test-{uuid.uuid4().hex[:8]}"
        ports = _distinct_free_ports(2 * size)
        self.members = [EtcdMember(f"etcd-{i + 1}", ports[2 * i], ports[2 * i + 1],
                                   self.base_dir / f"etcd-{i + 1}.data", self.base_dir)
                        for i in range(size)]
        self.initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        self.closed = False
        atexit.register(self.close)
        started = time.monotonic()
        try:
            self.start_all(start_timeout)
        except BaseException:
            self.close()
            raise
        # Seconds from the first exec to every member saying healthy.
        self.startup_seconds = time.monotonic() - started

    # ------------------------------------------------------------------
    # Members

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def start_member(self, i: int, wait: bool = True, timeout: float = 30.0) -> None:
        self.members[i].start(self.initial_cluster, self.token)
        if wait:
            self.wait_healthy([i], timeout)

    def stop_member(self, i: int) -> None:
        """SIGTERM: the member leaves its peers a clean log."""
        self.members[i].stop(signal.SIGTERM)

    def kill_member(self, i: int) -> None:
        self.members[i].stop(signal.SIGKILL)

    def start_all(self, timeout: float = 30.0) -> float:
        """Starts every stopped member at once (a lone member of three has
        no quorum to wait for) and waits until all are healthy. Returns the
        seconds that took."""
        started = time.monotonic()
        for m in self.members:
            m.start(self.initial_cluster, self.token)
        self.wait_healthy(range(len(self.members)), timeout)
        return time.monotonic() - started

    def kill_all(self) -> None:
        for m in self.members:
            m.stop(signal.SIGKILL)

    def ensure_running(self, timeout: float = 30.0) -> None:
        """Every member running and healthy (after a test that left some down)."""
        if not all(m.running() for m in self.members):
            self.start_all(timeout)
        else:
            self.wait_healthy(range(len(self.members)), timeout)

    def wait_healthy(self, which: Sequence[int] | range, timeout: float = 30.0) -> None:
        which = list(which)
        deadline = time.monotonic() + timeout
        while True:
            dead = [self.members[i] for i in which if not self.members[i].running()]
            if dead:
                raise RuntimeError("etcd member exited:\n" + "\n".join(m.logs() for m in dead))
            if all(self.members[i].healthy() for i in which):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"etcd not healthy after {timeout}s:\n" +
                                   "\n".join(self.members[i].logs() for i in which))
            time.sleep(0.05)

    def close(self) -> None:
        """Stops every member; removes the data unless DPGATE_KEEP_LOGS is set."""
        if self.closed:
            return
        self.closed = True
        for m in self.members:
            m.stop(signal.SIGKILL)
        if not os.environ.get("DPGATE_KEEP_LOGS"):
            for m in self.members:
                shutil.rmtree(m.data_dir, ignore_errors=True)

    def logs(self) -> str:
        return "\n".join(m.logs() for m in self.members)

    # ------------------------------------------------------------------
    # The JSON gateway

    def call(self, path: str, body: dict, timeout: float = 5.0) -> dict:
        """POSTs `body` to /v3/<path> on the first running member that
        answers; raises EtcdUnavailable when none does."""
        errors = []
        for m in self.members:
            if not m.running():
                continue
            try:
                status, _, data = http_request(m.client_port, "POST", f"/v3/{path}", body=body, timeout=timeout)
            except OSError as e:
                errors.append(f"{m.name}: {e!r}")
                continue
            answer = json.loads(data) if data else {}
            if status != 200:
                errors.append(f"{m.name}: {status} {answer}")
                if status >= 500 or answer.get("code") == 14:  # unavailable: try the next member
                    continue
                raise RuntimeError(f"etcd /v3/{path} {body}: {status} {answer}")
            return answer
        raise EtcdUnavailable(f"no etcd member answered /v3/{path}: {errors}")

    def put(self, key: str, value: str | bytes | dict | list, lease: int | None = None) -> int:
        """Writes the key (a dict or list as JSON); returns the new revision."""
        if isinstance(value, (dict, list)):
            value = json.dumps(value)
        body = {"key": _b64(key), "value": _b64(value)}
        if lease is not None:
            body["lease"] = str(lease)
        return int(self.call("kv/put", body)["header"]["revision"])

    def range(self, prefix: str) -> dict[str, dict]:
        """Every key under `prefix`: {key: {"value": bytes, "mod_revision": int,
        "create_revision": int, "version": int, "lease": int}}."""
        raw = prefix.encode()
        answer = self.call("kv/range", {"key": _b64(raw), "range_end": _b64(_prefix_end(raw))})
        out = {}
        for kv in answer.get("kvs", []):
            out[_unb64(kv["key"]).decode()] = {
                "value": _unb64(kv.get("value", "")),
                "mod_revision": int(kv.get("mod_revision", 0)),
                "create_revision": int(kv.get("create_revision", 0)),
                "version": int(kv.get("version", 0)),
                "lease": int(kv.get("lease", 0)),
            }
        return out

    def get(self, key: str) -> bytes | None:
        answer = self.call("kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs", [])
        return _unb64(kvs[0].get("value", "")) if kvs else None

    def get_json(self, key: str):
        value = self.get(key)
        return None if value is None else json.loads(value)

    def delete_prefix(self, prefix: str) -> int:
        raw = prefix.encode()
        answer = self.call("kv/deleterange", {"key": _b64(raw), "range_end": _b64(_prefix_end(raw))})
        return int(answer.get("deleted", 0))

    def revision(self) -> int:
        """The cluster's current revision (a range read's header)."""
        return int(self.call("kv/range", {"key": _b64("\0")})["header"]["revision"])

    def compact(self, revision: int | None = None) -> int:
        """Compacts the history up to `revision` (default: the current one),
        physically, so that a watch from an older revision is refused as
        compacted. Returns the revision compacted at."""
        revision = self.revision() if revision is None else revision
        self.call("kv/compaction", {"revision": str(revision), "physical": True}, timeout=30.0)
        return revision

    def grant_lease(self, ttl_s: int) -> int:
        return int(self.call("lease/grant", {"TTL": str(ttl_s)})["ID"])


def unique_prefix(label: str = "") -> str:
    """A key prefix no other test uses: /dpgate-test/<label>-<random>/."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:40]
    return f"/dpgate-test/{safe}-{uuid.uuid4().hex[:8]}/"


@pytest.fixture(scope="module")
def etcd_cluster(tmp_path_factory):
    """One 3-member cluster for the whole module, stopped however it ends."""
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd"))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def etcd(etcd_cluster):
    """The module's cluster with every member running and healthy."""
    etcd_cluster.ensure_running()
    return etcd_cluster

