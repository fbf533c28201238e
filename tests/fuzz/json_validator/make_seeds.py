#!/usr/bin/env python3
"""Writes the deep and wide seeds of tests/fuzz/json_validator/corpus and
tests/fuzz/admission/corpus (each under 2 MB). The small seeds are written
by hand; run this again only to change the generated ones."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
VALIDATOR = HERE / "corpus"
ADMISSION = HERE.parent / "admission" / "corpus"


def arrays(levels: int, closed: bool = True) -> bytes:
    return b"[" * levels + (b"]" * levels if closed else b"")


def objects(levels: int, closed: bool = True) -> bytes:
    return b'{"a":' * levels + (b"1" + b"}" * levels if closed else b"")


def wide_array(elements: int) -> bytes:
    return b"[" + b",".join([b"0"] * elements) + b"]"


def wide_object(keys: int) -> bytes:
    return b"{" + b",".join(b'"k%d":%d' % (i, i % 10) for i in range(keys)) + b"}"


def write(folder: Path, name: str, data: bytes) -> None:
    assert len(data) <= 2 * 1024 * 1024 + 16, (name, len(data))
    (folder / name).write_bytes(data)


def main() -> None:
    write(VALIDATOR, "deep_arrays_1000", arrays(1000))
    write(VALIDATOR, "deep_arrays_100000", arrays(100_000))
    write(VALIDATOR, "deep_arrays_1000000", arrays(1_000_000))
    write(VALIDATOR, "deep_arrays_open_1000000", arrays(1_000_000, closed=False))
    write(VALIDATOR, "deep_objects_1000", objects(1000))
    write(VALIDATOR, "deep_objects_100000", objects(100_000))
    write(VALIDATOR, "deep_objects_open_400000", objects(400_000, closed=False))
    write(VALIDATOR, "wide_array_1000000", wide_array(1_000_000))
    write(VALIDATOR, "wide_object_100000", wide_object(100_000))
    write(VALIDATOR, "long_string_escapes", b'["' + b"abc\\n\\u00e9\\\"" * 50_000 + b'"]')

    # Admission seeds: the first byte picks the endpoint (0: chat, 1: completions).
    head = b'{"model":"m","messages":[{"role":"user","content":"hi"}],'
    chat = lambda field, value: b"\x00" + head + b'"' + field + b'":' + value + b"}"
    write(ADMISSION, "deep_kwargs_arrays_100000", chat(b"chat_template_kwargs", b'{"x":' + arrays(100_000) + b"}"))
    write(ADMISSION, "deep_kwargs_objects_1000", chat(b"chat_template_kwargs", objects(1000)))
    write(ADMISSION, "deep_tools_objects_1000",
          chat(b"tools", b'[{"type":"function","function":{"name":"f","parameters":' + objects(1000) + b"}}]"))
    write(ADMISSION, "deep_tools_arrays_open_1000000",
          chat(b"tools", b'[{"type":"function","function":{"name":"f","parameters":{"a":' +
               arrays(1_000_000, closed=False)))
    write(ADMISSION, "deep_arguments_arrays_100000",
          b"\x00" + b'{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function",'
          b'"function":{"name":"f","arguments":' + arrays(100_000) + b"}}]}]}")
    write(ADMISSION, "deep_documents_arrays_1000", chat(b"documents", arrays(1000)))
    write(ADMISSION, "deep_metadata_objects_100000", chat(b"metadata", objects(100_000)))
    write(ADMISSION, "deep_metadata_arrays_1000000", chat(b"metadata", arrays(1_000_000)))
    write(ADMISSION, "deep_prompt_arrays_1000", b'\x01{"model":"m","prompt":' + arrays(1000) + b"}")
    write(ADMISSION, "wide_metadata_array_1000000", chat(b"metadata", wide_array(1_000_000)))
    write(ADMISSION, "wide_kwargs_object_100000", chat(b"chat_template_kwargs", wide_object(100_000)))
    write(ADMISSION, "wide_prompt_ids_100000", b'\x01{"model":"m","prompt":' + wide_array(100_000) + b"}")


if __name__ == "__main__":
    main()
