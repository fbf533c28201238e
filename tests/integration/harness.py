"""Reusable helpers for dpgate's integration tests: start real processes on
ephemeral ports, talk raw HTTP to them, read SSE streams with timestamps.

Standard library only (plus pytest for the fixtures at the bottom).
Binaries come from $DPGATE_BIN_DIR, default <repo>/build/bin.

Sanitizer builds: a dpgate or dpgate-sim whose stderr holds a sanitizer
report (ThreadSanitizer, AddressSanitizer, LeakSanitizer, UBSan) fails the
test when it is stopped, with the report in the failure and its log folder
kept. Children get TSAN_OPTIONS with tests/tsan.supp unless the caller set
their own.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# A TSan report does not stop the process (the test runs on and every race
# of the run is reported); the harness fails the test at stop() instead, and
# exitcode makes a child run to completion by subprocess.run() fail too.
os.environ.setdefault("TSAN_OPTIONS", f"suppressions={REPO_ROOT / 'tests' / 'tsan.supp'}"
                                      ":exitcode=66:second_deadlock_stack=1:history_size=4")

# The first line of each sanitizer's report.
_SANITIZER_REPORT = re.compile(r"^(WARNING: ThreadSanitizer:|==\d+==ERROR: (AddressSanitizer|LeakSanitizer):"
                               r"|.*: runtime error: )", re.MULTILINE)


class SanitizerReport(AssertionError):
    """A child process printed a sanitizer report."""


def bin_dir() -> Path:
    return Path(os.environ.get("DPGATE_BIN_DIR", REPO_ROOT / "build" / "bin"))


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago. Prefer --port-file where the
    program supports it: this one can be taken by someone else meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")
            time.sleep(0.02)


class Process:
    """A child process whose stdout/stderr go to files (never a pipe that
    could fill up and block it)."""

    def __init__(self, argv: Sequence[str], log_dir: Path, name: str):
        self.argv = [str(a) for a in argv]
        self.stdout_path = log_dir / f"{name}.stdout"
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stdout = open(self.stdout_path, "wb")
        self._stderr = open(self.stderr_path, "wb")
        self.popen = subprocess.Popen(self.argv, stdout=self._stdout, stderr=self._stderr,
                                      stdin=subprocess.DEVNULL)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM, wait, SIGKILL on timeout. Returns the exit code."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._stdout.close()
        self._stderr.close()
        return self.popen.returncode

    def describe(self) -> str:
        return (f"{' '.join(self.argv)}\n--- stdout ---\n{self.stdout()}"
                f"\n--- stderr ---\n{self.stderr()}")

    def sanitizer_report(self) -> str | None:
        """The sanitizer report(s) on stderr, from the first one on; None if clean."""
        text = self.stderr()
        match = _SANITIZER_REPORT.search(text)
        if match is None:
            return None
        report = text[match.start():]
        return report if len(report) <= 40000 else report[:40000] + "\n[... cut]"

    def check_sanitizers(self, log_dir: Path) -> None:
        """Raises SanitizerReport once if the process printed a report."""
        if getattr(self, "_sanitizer_checked", False):
            return
        self._sanitizer_checked = True
        report = self.sanitizer_report()
        if report is not None:
            raise SanitizerReport(f"{Path(self.argv[0]).name} (exit {self.popen.returncode}) printed a sanitizer "
                                  f"report; logs kept in {log_dir}\n{report}")


def start_process(argv: Sequence[str], ready: str | Path, timeout: float = 10.0,
                  log_dir: Path | None = None, name: str | None = None) -> Process:
    """Starts argv and waits until it is ready: `ready` is either a Path (a
    port file the program writes once listening) or a str (a line it prints
    on stdout). Raises with the process's output if it dies or times out."""
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="dpgate-it-"))
    name = name or Path(str(argv[0])).name
    proc = Process(argv, log_dir, name)
    deadline = time.monotonic() + timeout
    while True:
        if isinstance(ready, Path):
            if ready.exists() and ready.read_text().strip():
                return proc
        elif any(line.startswith(ready) for line in proc.stdout().splitlines()):
            return proc
        if not proc.alive():
            out = proc.describe()
            proc.stop()
            raise RuntimeError(f"process exited with {proc.popen.returncode} before ready:\n{out}")
        if time.monotonic() > deadline:
            out = proc.describe()
            proc.stop()
            raise TimeoutError(f"process not ready after {timeout}s:\n{out}")
        time.sleep(0.02)


# --------------------------------------------------------------------------
# Raw HTTP


def _encode_body(body, headers: dict[str, str]) -> bytes | None:
    if isinstance(body, (dict, list)):
        headers.setdefault("Content-Type", "application/json")
        return json.dumps(body).encode()
    if isinstance(body, str):
        return body.encode()
    return body


def http_request(port: int, method: str, path: str, headers: Mapping[str, str] | None = None,
                 body: bytes | str | dict | list | None = None, host: str = "127.0.0.1",
                 timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection. A dict/list body is sent as JSON.
    Returns (status, headers with lower-case names, body bytes)."""
    headers = dict(headers or {})
    body = _encode_body(body, headers)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def http_json(port: int, method: str, path: str, body=None, headers=None, **kw):
    """http_request, with the answer's body decoded as JSON (None if empty)."""
    status, hdrs, data = http_request(port, method, path, headers, body, **kw)
    return status, hdrs, (json.loads(data) if data else None)


class SseEvent:
    def __init__(self, data: str, at: float):
        self.data = data  # the text after "data: "
        self.at = at      # time.monotonic() when the event's blank line arrived

    def json(self):
        return json.loads(self.data)

    def __repr__(self) -> str:
        return f"SseEvent({self.data[:60]!r}, at={self.at:.3f})"


class StreamResponse:
    """An HTTP/1.1 response read straight off a socket, so a test sees the body
    as it arrives and can tell a cleanly ended body (terminal chunk, full
    Content-Length) from one cut by the server (`complete` stays False)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = b""
        self.complete = False
        status_line = self._readline().decode("latin-1")
        self.version, status, *_ = status_line.split(" ", 2)
        self.status = int(status)
        self.headers: dict[str, str] = {}
        while line := self._readline():
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self._buf += data

    def _readline(self) -> bytes:
        while b"\r\n" not in self._buf:
            self._fill()
        line, _, self._buf = self._buf.partition(b"\r\n")
        return line

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def body_chunks(self) -> Iterator[bytes]:
        """Yields body bytes as they arrive; ends quietly on a premature EOF
        (check `complete`)."""
        try:
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                while True:
                    size = int(self._readline().split(b";")[0], 16)
                    if size == 0:
                        while self._readline():
                            pass
                        self.complete = True
                        return
                    data = self._read_exact(size)
                    self._read_exact(2)
                    yield data
            elif "content-length" in self.headers:
                left = int(self.headers["content-length"])
                while left > 0:
                    if not self._buf:
                        self._fill()
                    data, self._buf = self._buf[:left], self._buf[left:]
                    left -= len(data)
                    yield data
                self.complete = True
            else:
                while True:
                    if self._buf:
                        data, self._buf = self._buf, b""
                        yield data
                    try:
                        self._fill()
                    except EOFError:
                        self.complete = True
                        return
        except (EOFError, ConnectionError):
            return

    def read(self) -> bytes:
        return b"".join(self.body_chunks())

    def events(self) -> Iterator[SseEvent]:
        """Server-sent events of the body, each stamped when its terminating
        blank line arrived."""
        pending = b""
        data_lines: list[str] = []
        for chunk in self.body_chunks():
            now = time.monotonic()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                text = raw.decode().rstrip("\r")
                if text == "":
                    if data_lines:
                        yield SseEvent("\n".join(data_lines), now)
                        data_lines = []
                elif text.startswith("data:"):
                    data_lines.append(text[5:].lstrip(" "))


@contextlib.contextmanager
def open_stream(port: int, path: str, body, headers: Mapping[str, str] | None = None,
                host: str = "127.0.0.1", timeout: float = 30.0, method: str = "POST"):
    """Sends one request on a fresh socket and yields a StreamResponse with the
    headers read and the body not yet consumed; the socket is closed on exit
    (which is how a test disconnects mid-stream)."""
    headers = dict(headers or {})
    payload = _encode_body(body, headers) or b""
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(payload)}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
        yield StreamResponse(sock)
    finally:
        sock.close()


def sse_events(port: int, path: str, body, headers: Mapping[str, str] | None = None,
               **kw) -> tuple[int, dict[str, str], list[SseEvent], bool]:
    """Streams a request to its end. Returns (status, headers, events,
    complete); complete is False when the server cut the body short."""
    with open_stream(port, path, body, headers, **kw) as resp:
        events = list(resp.events())
        return resp.status, resp.headers, events, resp.complete


# --------------------------------------------------------------------------
# The backend simulator


class Sim:
    """A dpgate-sim process on an ephemeral port.

        with Sim(dp=8, decode_us_per_token=1000) as sim:
            http_json(sim.port, "GET", "/v1/models")
    """

    def __init__(self, *, dp: int = 8, window: int = 1048576, model: str = "ds-v4.1-flash-1017",
                 cache_tokens: int | None = None, prefill_us_per_token: int | None = None,
                 decode_us_per_token: int | None = None, max_output: int | None = None,
                 threads: int | None = None, fault: str | None = None,
                 extra_args: Iterable[str] = (), host: str = "127.0.0.1", timeout: float = 10.0,
                 port: int = 0):
        self.host = host
        self.model = model
        self.window = window
        self.dp = dp
        self._dir = Path(tempfile.mkdtemp(prefix="dpgate-sim-"))
        port_file = self._dir / "port"
        argv = [str(bin_dir() / "dpgate-sim"), "--listen", f"{host}:{port}", "--port-file", str(port_file),
                "--dp", str(dp), "--window", str(window), "--model", model]
        optional = {"--cache-tokens": cache_tokens, "--prefill-us-per-token": prefill_us_per_token,
                    "--decode-us-per-token": decode_us_per_token, "--max-output": max_output,
                    "--threads": threads, "--fault": fault}
        for flag, value in optional.items():
            if value is not None:
                argv += [flag, str(value)]
        argv += list(extra_args)
        self.process = start_process(argv, port_file, timeout, log_dir=self._dir, name="dpgate-sim")
        self.port = int(port_file.read_text())
        self.url = f"http://{host}:{self.port}"

    def request(self, method: str, path: str, body=None, headers=None, **kw):
        return http_request(self.port, method, path, headers, body, host=self.host, **kw)

    def json(self, method: str, path: str, body=None, headers=None, **kw):
        return http_json(self.port, method, path, body, headers, host=self.host, **kw)

    def set_fault(self, mode: str, **params) -> dict:
        status, _, state = self.json("POST", "/sim/fault", {"mode": mode, **params})
        assert status == 200, state
        return state

    def fault(self) -> dict:
        return self.json("GET", "/sim/fault")[2]

    def stats(self) -> dict:
        return self.json("GET", "/sim/stats")[2]

    def reset(self) -> None:
        assert self.json("POST", "/sim/reset")[0] == 200

    def stop(self) -> int:
        """Stops the sim; its log folder is removed unless DPGATE_KEEP_LOGS is
        set or it printed a sanitizer report (raised as SanitizerReport)."""
        code = self.process.stop()
        self.process.check_sanitizers(self._dir)
        if not os.environ.get("DPGATE_KEEP_LOGS"):
            shutil.rmtree(self._dir, ignore_errors=True)
        return code

    def __enter__(self) -> "Sim":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture
def sim():
    """A default dpgate-sim (8 ranks, 1M window), stopped after the test."""
    with Sim() as s:
        yield s


# --------------------------------------------------------------------------
# The gateway

CLIENT_KEY = "sk-dpgate-local"
ADMIN_TOKEN = "admin-dpgate-local"
MODEL = "ds-v4.1-flash-1017"
TOKENIZER = Path(os.environ.get("DPGATE_TOKENIZER_DIR", REPO_ROOT / "local" / "tokenizer" / "deepseek-v3")) / "tokenizer.json"
# dpgate-sim flags that make it count prompt tokens as the served model does
# (vLLM counts what dpgate counts): benchmarks measure the path a real
# backend takes, not dpgate's count-mismatch path.
EXACT_SIM_COUNTS = ("--tokenizer", str(TOKENIZER.parent))


def chat_body(text: str = "Hello!", **extra) -> dict:
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}]}
    body.update(extra)
    return body


def gateway_config(backends: Sequence[tuple[str, "Sim", str]], **sections) -> dict:
    """A dpgate config (as a dict; JSON is YAML) for the given
    (name, sim, role) backends, both listeners on ephemeral ports. Keyword
    arguments override whole sections or merge into them when dicts."""
    config = {
        "listen": {"address": "127.0.0.1", "port": 0},
        "admin": {"address": "127.0.0.1", "port": 0, "token_plain": ADMIN_TOKEN},
        "model": {"id": MODEL, "window_tokens": 1048576, "max_output_tokens": 32768, "tokenizer": str(TOKENIZER)},
        "health": {"interval_ms": 200, "timeout_ms": 1000, "fall": 2, "rise": 2},
        "backends": [{"name": name, "url": sim.url, "role": role, "dp_ranks": sim.dp}
                     for name, sim, role in backends],
        "auth": {"required": True, "keys": [{"name": "local-demo", "key": CLIENT_KEY}]},
        "log": {"level": "info"},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key].update(value)
        else:
            config[key] = value
    return config


class Gateway:
    """A `dpgate serve` process on ephemeral ports, started from a config dict.

        with Sim() as primary, Gateway(gateway_config([("primary", primary, "primary")])) as gw:
            http_json(gw.port, "GET", "/v1/models")
    """

    def __init__(self, config: dict, timeout: float = 15.0, wait_healthy: bool = True,
                 binary: Path | None = None, extra_args: Sequence[str] = ()):
        self.config = config
        self._dir = Path(tempfile.mkdtemp(prefix="dpgate-gw-"))
        self.config_path = self._dir / "dpgate.yaml"
        self.config_path.write_text(json.dumps(config, indent=2))
        argv = [str(binary or bin_dir() / "dpgate"), "serve", "--config", str(self.config_path), *extra_args]
        self.process = start_process(argv, "dpgate listening on", timeout, log_dir=self._dir, name="dpgate")
        line = next(l for l in self.process.stdout().splitlines() if l.startswith("dpgate listening on"))
        # "dpgate listening on 127.0.0.1:PORT (admin 127.0.0.1:PORT, N threads)"
        self.port = int(line.split()[3].rsplit(":", 1)[1])
        self.admin_port = int(line.split("(admin ")[1].split(",")[0].rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"
        if wait_healthy:
            self.wait_all_healthy(timeout)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_health(self, status: int, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            code, _, body = http_json(self.port, "GET", "/health")
            if code == status:
                return body
            if not self.process.alive():
                raise RuntimeError("dpgate exited:\n" + self.process.describe())
            if time.monotonic() > deadline:
                raise TimeoutError(f"/health stayed {code} {body}, wanted {status}")
            time.sleep(0.05)

    def wait_all_healthy(self, timeout: float = 10.0) -> dict:
        """Until every backend has passed a probe: /health is 200 as soon as
        one has, and a test that starts then could meet the standby."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.wait_health(200, timeout)
            if all(b["healthy"] for b in body["backends"]):
                return body
            if time.monotonic() > deadline:
                raise TimeoutError(f"not every backend became healthy: {body}")
            time.sleep(0.05)

    def request(self, method: str, path: str, body=None, headers=None, **kw):
        headers = {"Authorization": f"Bearer {CLIENT_KEY}", **(headers or {})}
        return http_request(self.port, method, path, headers, body, **kw)

    def json(self, method: str, path: str, body=None, headers=None, **kw):
        headers = {"Authorization": f"Bearer {CLIENT_KEY}", **(headers or {})}
        return http_json(self.port, method, path, body, headers, **kw)

    def admin(self, method: str, path: str, body=None, headers=None, **kw):
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", **(headers or {})}
        return http_json(self.admin_port, method, path, body, headers, **kw)

    def raw(self, data: bytes, timeout: float = 5.0, read_until_close: bool = True) -> bytes:
        """Sends raw bytes on a fresh connection; returns everything the
        gateway sends back until it closes (or the timeout)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            out = b""
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    out += chunk
                    if not read_until_close and b"\r\n\r\n" in out:
                        break
            except socket.timeout:
                pass
            return out

    def stop(self, timeout: float = 10.0) -> int:
        """Stops dpgate (SIGTERM: it drains); as Sim.stop for logs and reports."""
        code = self.process.stop(timeout)
        self.process.check_sanitizers(self._dir)
        if not os.environ.get("DPGATE_KEEP_LOGS"):
            shutil.rmtree(self._dir, ignore_errors=True)
        return code

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------
# Process resources (robustness tests): what a process holds, read from /proc.


def fd_count(pid: int) -> int:
    """Open file descriptors of a process."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    """Resident memory of a process (VmRSS), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def is_sanitized(pid: int) -> bool:
    """True for a process built with AddressSanitizer (gcc links libasan):
    its memory figures are ASan's quarantine and shadow, not the program's."""
    return "libasan" in Path(f"/proc/{pid}/maps").read_text()


def raise_nofile_limit(wanted: int | None = None) -> tuple[int, int]:
    """Raises this process's soft RLIMIT_NOFILE to `wanted` (default: the hard
    limit). Children started afterwards (dpgate, dpgate-sim) inherit it.
    Returns the (soft, hard) limits now in force."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if wanted is None else wanted
    if hard != resource.RLIM_INFINITY:
        target = min(target, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def wait_fd_count(pid: int, at_most: int, timeout: float = 5.0) -> int:
    """Polls until the process holds at most `at_most` descriptors; returns
    the last count (the caller asserts on it, so a leak shows its size)."""
    deadline = time.monotonic() + timeout
    while True:
        count = fd_count(pid)
        if count <= at_most or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def poll(fetch, done, timeout: float = 5.0):
    """fetch() until done(value) or the timeout; the last value either way,
    for the caller's assertion (for state a gateway updates after it
    answers: on another worker, a timer, after the last write)."""
    deadline = time.monotonic() + timeout
    while not done(value := fetch()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def json_lines(path: Path) -> list[dict]:
    """The whole lines of a JSON-lines file (an access log), parsed. A read
    while a worker writes its batch can end mid-line; that line is left for
    the next read."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n") and line.strip()]


def metric_sample(page: str, name: str, **labels) -> float:
    """The sum of the samples of `name` on a Prometheus text page whose
    labels include `labels` (0 when there are none)."""
    total = 0.0
    for line in page.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total
