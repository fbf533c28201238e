#!/usr/bin/env python3
"""Writes the deep and wide seeds of the fuzz corpora whose inputs are not
JSON request bodies (those have their own generators: json_validator/,
template/, usage/): acceptance records, backend /metrics pages, configs,
client request heads and bodies, and the texts the gateway quotes. Each
seed is under 2 MB, so that replaying the corpus stays quick; run this again
only to change them."""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def write(target: str, name: str, data: bytes) -> None:
    assert len(data) <= 2 * 1024 * 1024, (target, name, len(data))
    (HERE / target / "corpus" / name).write_bytes(data)


def deep_arrays(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def deep_objects(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


def main() -> None:
    # etcd's JSON gateway answers (gateway/control/): deep, and wide ranges.
    import base64
    for levels in (1_000, 100_000):
        write("control", f"deep_arrays_{levels}", deep_arrays(levels))
        write("control", f"deep_objects_{levels}", deep_objects(levels))
    kv = lambda k, v, r: ('{"key":"%s","value":"%s","mod_revision":"%d","create_revision":"1"}'
                          % (base64.b64encode(k).decode(), base64.b64encode(v).decode(), r))
    write("control", "range_wide_15000", ('{"header":{"revision":"15001"},"kvs":[' +
          ",".join(kv(b"/dpgate/replicas/r%d" % i, b'{"id":"r%d"}' % i, i + 1) for i in range(15000)) +
          '],"count":"15000"}').encode())
    write("control", "watch_events", ('{"result":{"header":{"revision":"9"},"events":[' + kv(b"/dpgate/state", b"{}", 9) +
          ',{"type":"DELETE","kv":{"key":"L2RwZ2F0ZS9h","mod_revision":"9"}}]}}').encode())
    write("control", "watch_compacted",
          b'{"result":{"header":{"revision":"5"},"canceled":true,"compact_revision":"4"}}')
    write("control", "base64_padding", b"QQ==QQ==")
    # Acceptance records and state files (JSON read from disk and from the admin API).
    for levels in (1_000, 100_000):
        write("acceptance", f"deep_arrays_{levels}", deep_arrays(levels))
        write("acceptance", f"deep_objects_{levels}", deep_objects(levels))
    write("acceptance", "deep_in_a_record_field",
          b'{"backend":"b","checks":' + deep_arrays(100_000) + b"}")
    checks = b",".join(b'{"name":"c%d","passed":true,"detail":"x"}' % i for i in range(30_000))
    write("acceptance", "wide_checks_30000", b'{"backend":"b","passed":true,"checks":[' + checks + b"]}")

    # A backend's /metrics page: many series, a huge label set, a long line.
    lines = b"".join(b'vllm:num_requests_running{engine="%d",model_name="m"} %d\n' % (i % 8, i)
                     for i in range(30_000))
    write("backend_metrics", "wide_30000_series", lines)
    labels = b",".join(b'l%d="v"' % i for i in range(100_000))
    write("backend_metrics", "wide_labels", b"vllm:num_requests_running{" + labels + b"} 1\n")
    write("backend_metrics", "long_value_line", b"vllm:num_requests_running " + b"9" * 1_000_000 + b"\n")
    write("backend_metrics", "deep_braces", b"m" + b"{" * 100_000 + b"}" * 100_000 + b" 1\n")

    # Backends' /metrics pages to merge (NUL between pages; an empty one is down).
    write("merge_backend_pages", "wide_30000_series", lines[:len(lines) // 2] + b"\0" + lines[len(lines) // 2:])
    write("merge_backend_pages", "wide_labels", b"vllm:num_requests_running{" + labels + b"} 1\n")
    write("merge_backend_pages", "wide_64_labels",
          b"x{" + b",".join(b'l%d="v"' % i for i in range(64)) + b"} 1\n")
    write("merge_backend_pages", "wide_30000_families",
          b"".join(b"# HELP f%d h\n# TYPE f%d gauge\nf%d 1\n" % (i, i, i) for i in range(30_000)))
    write("merge_backend_pages", "deep_braces", b"m" + b"{" * 100_000 + b"}" * 100_000 + b" 1\n")
    write("merge_backend_pages", "long_value_line", b"x " + b"9" * 1_000_000 + b"\n")
    write("merge_backend_pages", "long_escapes", b'x{a="' + b'\\"' * 300_000 + b'"} 1\n')

    # Configs: YAML nested deeply in flow and block style, and wide.
    write("conf", "deep_flow_sequences_100000", b"model: " + deep_arrays(100_000) + b"\n")
    write("conf", "deep_flow_mappings_50000", b"model: " + b"{a: " * 50_000 + b"1" + b"}" * 50_000 + b"\n")
    write("conf", "deep_block_mappings_1500",
          b"".join(b" " * i + b"k%d:\n" % i for i in range(1_500)) + b" " * 1_500 + b"v: 1\n")
    write("conf", "wide_backends_20000",
          b"backends:\n" + b"".join(b"  - {name: b%d, url: \"http://h:%d\"}\n" % (i, 1 + i % 60000)
                                    for i in range(20_000)))
    write("conf", "long_scalar", b"model:\n  id: " + b"x" * 1_500_000 + b"\n")

    # Client requests: heads with many or huge fields, bodies of many chunks.
    write("framing", "fields_20000",
          b"GET / HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(20_000)) + b"\r\n")
    write("framing", "field_value_1mb", b"GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + b"v" * 1_000_000 + b"\r\n\r\n")
    write("framing", "target_1mb", b"GET /" + b"a" * 1_000_000 + b" HTTP/1.1\r\nHost: h\r\n\r\n")
    write("framing", "chunks_100000",
          b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * 100_000 + b"0\r\n\r\n")
    write("framing", "chunk_extensions_long",
          b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"e=v;" * 100_000
          + b"\r\nx\r\n0\r\n\r\n")

    # Redis's replies (gateway/redis/; first byte: where the stream is cut).
    write("redis", "deep_arrays_100000", b"\x01" + b"*1\r\n" * 100_000 + b":1\r\n")
    write("redis", "wide_array_100000", b"\x02" + b"*100000\r\n" + b":1\r\n" * 100_000)
    write("redis", "wide_strings_50000", b"\x03" + b"*50000\r\n" + b"$3\r\nabc\r\n" * 50_000)

    # Texts the gateway quotes (first byte: where a clip cuts).
    write("gateway_text", "deep_backend_error", b"\x80" + deep_objects(100_000))
    write("gateway_text", "wide_backend_error",
          b"\x40" + b'{"error":{"message":"' + "é".encode() * 400_000 + b'"}}')
    write("gateway_text", "invalid_utf8_long", b"\x10" + bytes(range(128, 256)) * 8_000)


if __name__ == "__main__":
    main()
