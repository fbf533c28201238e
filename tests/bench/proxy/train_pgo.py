#!/usr/bin/python3
"""The training run of a profile-guided build (scripts/build pgo): drives an
instrumented dpgate through what it does most, so the compiler lays out the
hot path from real counts.

    tests/bench/proxy/train_pgo.py INSTRUMENTED_DPGATE [--seconds 6]

Starts dpgate-sim (build/bin) and the instrumented binary (2 threads, as the
benchmark runs it), then: wrk with small non-streaming chats at 32 and 256
connections (tests/bench/proxy/bench_post.lua), 100 concurrent SSE streams,
and a few long prompts that take the exact-count path. dpgate writes its
.gcda profile when it exits.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "integration"))
import bench_proxy  # noqa: E402
from harness import (CLIENT_KEY, EXACT_SIM_COUNTS, TOKENIZER, Gateway, Sim, chat_body,  # noqa: E402
                     gateway_config, http_request)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", type=Path)
    ap.add_argument("--seconds", type=float, default=6)
    args = ap.parse_args()
    # Without the tokenizer (scripts/setup installs it; a container build has
    # none) the count path is not trained, and the simulator counts its own way.
    counting = TOKENIZER.exists()
    with Sim(threads=1, max_output=16, extra_args=EXACT_SIM_COUNTS if counting else ()) as sim:
        config = gateway_config([("primary", sim, "primary")], threads=2, log={"level": "warn", "access": "off"},
                                health={"interval_ms": 1000, "timeout_ms": 10000, "fall": 10, "rise": 1})
        if not counting:
            del config["model"]["tokenizer"]
            print(f"no {TOKENIZER}: training without the exact count", file=sys.stderr)
        with Gateway(config, binary=args.binary, timeout=60) as gw:
            for conns in (32, 256):
                subprocess.run(["wrk", "-t2", f"-c{conns}", f"-d{args.seconds:g}s", "--timeout", "10s",
                                "-s", str(bench_proxy.LUA), gw.url], capture_output=True, check=True)
            bench_proxy.stream_run(gw.port, 100, args.seconds, [])
            auth = {"Authorization": f"Bearer {CLIENT_KEY}"}
            for words in (1_000, 10_000, 50_000) if counting else ():
                text = " ".join(f"word{i % 977} café 数据 {i}" for i in range(words))
                status, _, _ = http_request(gw.port, "POST", "/v1/chat/completions",
                                            headers=auth, body=chat_body(text, max_tokens=4))
                if status != 200:
                    print(f"a long prompt got {status}", file=sys.stderr)
                    return 1
    print(f"trained {args.binary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
