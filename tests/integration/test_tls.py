"""TLS on the client listener, through real processes: curl and openssl
s_client as clients, a certificate renewed on SIGHUP, plain HTTP refused."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness import CLIENT_KEY, Gateway, Sim, chat_body, gateway_config

CHAT = "/v1/chat/completions"


def make_cert(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for localhost / 127.0.0.1 (openssl CLI)."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def served_certificate(port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return tls.getpeercert(binary_form=True)


@pytest.fixture
def tls_gateway(tmp_path):
    cert, key = make_cert(tmp_path, "first")
    # The served files: renewing means replacing their contents.
    served_cert, served_key = tmp_path / "server.crt", tmp_path / "server.key"
    served_cert.write_bytes(cert.read_bytes())
    served_key.write_bytes(key.read_bytes())
    with Sim() as sim:
        config = gateway_config([("primary", sim, "primary")],
                                listen={"tls": {"cert": str(served_cert), "key": str(served_key)}})
        # The harness waits on /health over plain HTTP; here it must not.
        with Gateway(config, wait_healthy=False) as gw:
            deadline = time.monotonic() + 15
            while True:
                status = gw.admin("GET", "/admin/status")[2]
                if all(b["healthy"] for b in status["backends"]):
                    break
                assert time.monotonic() < deadline, status
                time.sleep(0.05)
            yield gw, cert, tmp_path, served_cert, served_key


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", "--max-time", "20", *args], capture_output=True, text=True)


def test_curl_over_tls_gets_answers_and_streams(tls_gateway):
    gw, cert, _, _, _ = tls_gateway
    url = f"https://localhost:{gw.port}"
    done = curl("--cacert", str(cert), "-H", f"Authorization: Bearer {CLIENT_KEY}",
                "-H", "Content-Type: application/json", "-d", json.dumps(chat_body("hello over TLS", max_tokens=3)),
                "-w", "\n%{http_code} %{ssl_verify_result}", url + CHAT)
    assert done.returncode == 0, done.stderr
    body, tail = done.stdout.rsplit("\n", 1)
    assert tail == "200 0"
    assert json.loads(body)["usage"]["completion_tokens"] == 3

    stream = curl("-N", "--cacert", str(cert), "-H", f"Authorization: Bearer {CLIENT_KEY}",
                  "-H", "Content-Type: application/json",
                  "-d", json.dumps(chat_body("stream over TLS", max_tokens=4, stream=True)), url + CHAT)
    assert stream.returncode == 0, stream.stderr
    events = [l[6:] for l in stream.stdout.splitlines() if l.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) >= 5

    # Keep-alive over one TLS connection: curl reuses it for both URLs.
    both = curl("--cacert", str(cert), "-v", url + "/health", url + "/health")
    assert both.returncode == 0 and both.stderr.count("Re-using existing connection") >= 1, both.stderr


def test_openssl_s_client_negotiates_tls12_and_13_but_not_older(tls_gateway):
    gw, _, _, _, _ = tls_gateway
    request = "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    for version in ("-tls1_2", "-tls1_3"):
        done = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{gw.port}", version, "-quiet",
                               "-servername", "localhost"], input=request, capture_output=True, text=True, timeout=20)
        assert "HTTP/1.1 200 OK" in done.stdout, (version, done.stdout, done.stderr)
    old = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{gw.port}", "-tls1_1", "-cipher",
                          "DEFAULT@SECLEVEL=0"], input="", capture_output=True, text=True, timeout=20)
    assert "HTTP/1.1" not in old.stdout
    assert old.returncode != 0 or "Cipher is (NONE)" in old.stdout, old.stdout + old.stderr


def test_plain_http_on_the_tls_port_is_refused_with_a_clear_400(tls_gateway):
    gw, _, _, _, _ = tls_gateway
    reply = gw.raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), reply
    assert json.loads(body)["error"]["code"] == "plain_http_on_tls_port"
    # A ClientHello record full of garbage fails the handshake: a TLS alert
    # at most, never an HTTP answer, and dpgate goes on serving.
    hello = b"\x01\x00\x00\x3c\x03\x03" + b"\xee" * 58  # a ClientHello whose body is junk
    reply = gw.raw(b"\x16\x03\x01\x00\x40" + hello, timeout=5)
    assert not reply.startswith(b"HTTP") and len(reply) < 64, reply
    assert gw.process.alive()


def test_sighup_serves_a_renewed_certificate_to_new_connections(tls_gateway):
    gw, _, directory, served_cert, served_key = tls_gateway
    before = served_certificate(gw.port)
    # A connection opened before the renewal keeps working on the old certificate.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    old = context.wrap_socket(socket.create_connection(("127.0.0.1", gw.port), timeout=5), server_hostname="localhost")
    try:
        cert, key = make_cert(directory, "renewed")
        served_cert.write_bytes(cert.read_bytes())
        served_key.write_bytes(key.read_bytes())
        gw.process.popen.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while served_certificate(gw.port) == before:
            assert time.monotonic() < deadline, "the renewed certificate was never served"
            time.sleep(0.05)
        assert served_certificate(gw.port) == ssl.PEM_cert_to_DER_cert(cert.read_text())
        old.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert old.recv(100).startswith(b"HTTP/1.1 200")
        assert old.getpeercert(binary_form=True) == before
    finally:
        old.close()

    # A broken renewal is refused and the running certificate stays.
    served_key.write_text("not a key")
    status, _, raw = gw.admin("POST", "/admin/reload")
    assert status == 400 and "listen.tls.key" in raw["error"]["message"]
    assert served_certificate(gw.port) == ssl.PEM_cert_to_DER_cert(cert.read_text())


def test_many_tls_clients_at_once(tls_gateway):
    gw, cert, _, _, _ = tls_gateway
    context = ssl.create_default_context(cafile=str(cert))
    failures = []

    def client(n: int) -> None:
        try:
            with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as raw, \
                    context.wrap_socket(raw, server_hostname="localhost") as tls:
                body = json.dumps(chat_body(f"client {n}", max_tokens=2)).encode()
                for _ in range(3):
                    tls.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                                b"Authorization: Bearer " + CLIENT_KEY.encode() +
                                b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                    reply = b""
                    while b"\r\n\r\n" not in reply:
                        reply += tls.recv(65536)
                    head, _, rest = reply.partition(b"\r\n\r\n")
                    length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0]
                                 .split(b":")[1])
                    while len(rest) < length:
                        rest += tls.recv(65536)
                    if not head.startswith(b"HTTP/1.1 200") or json.loads(rest)["usage"]["completion_tokens"] != 2:
                        failures.append(head)
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            failures.append(repr(e))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_an_https_backend_is_refused_at_start_not_sent_cleartext(tmp_path):
    from harness import bin_dir
    config = gateway_config([])
    config["backends"] = [{"name": "primary", "url": "https://127.0.0.1:9", "role": "primary", "dp_ranks": 8}]
    path = tmp_path / "dpgate.yaml"
    path.write_text(json.dumps(config))
    done = subprocess.run([str(bin_dir() / "dpgate"), "serve", "--config", str(path)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 1
    assert "upstream https is not supported" in done.stderr
