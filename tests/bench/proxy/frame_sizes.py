#!/usr/bin/python3
"""Coroutine frame sizes in a dpgate binary, read from its machine code
(docs/BENCHMARKS.md).

    tests/bench/proxy/frame_sizes.py [DPGATE_BINARY] [--all]

Each awaitable coroutine's frame is an allocation per call. The dpgate
binary takes them from tcmalloc's per-thread size classes (CMakeLists.txt:
BOOST_ASIO_DISABLE_AWAITABLE_FRAME_RECYCLING), so a frame's size is memory
held per request in flight. A build without tcmalloc keeps Asio's
per-thread cache instead, which only keeps blocks of up to 1,020 bytes
(BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE of them, 8 in this build): there
a larger frame is an aligned_alloc and a free every time. GCC puts every
local of a coroutine, and every temporary that lives across a co_await, in
its frame, so one more local on a request's path grows it unnoticed: this
prints what each coroutine on that path costs, and marks the frames over
Asio's limit.

A frame's size is the constant the coroutine's ramp passes to the allocator;
the coroutine is the one whose resume function (`[clone .actor]`) the ramp
stores next, which also finds ramps the compiler inlined into a caller.
Without --all, only the coroutines every proxied request runs.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

RECYCLED_MAX = 1020  # 4-byte chunks counted in one byte: thread_info_base.hpp

# The coroutines of one proxied request, in the order it runs them.
PER_REQUEST = [
    "ClientSession::readHead",
    "ClientSession::serve",
    "serveRequest",  # a plain function: proxyRequest is the coroutine
    "proxyRequest",
    "forwardWithRetry",
    "UpstreamExchange::send",
    "pumpAnswer",
]

# The frame's allocation: operator new (the dpgate binary, frames from
# tcmalloc), Asio's recycling operator new or, for frames over its limit,
# aligned_alloc (builds without tcmalloc).
ALLOC = re.compile(r"call\s+\w+ <(aligned_alloc@plt|operator new\(unsigned long\)@plt|"
                   r"boost::asio::detail::awaitable_frame_base<.*>::operator new\(unsigned long\))>")
SIZE = re.compile(r"mov\s+\$0x([0-9a-f]+),%e(si|di)$")
ACTOR = re.compile(r"# \w+ <(.*) \[clone \.actor\]")


def frames(binary: Path) -> dict[str, int]:
    """Coroutine name (its actor's symbol, shortened) -> frame bytes."""
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", str(binary)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    found: dict[str, int] = {}
    for i, line in enumerate(asm):
        if not ALLOC.search(line):
            continue
        size = None
        for back in asm[max(0, i - 3):i]:
            m = SIZE.search(back.strip())
            # aligned_alloc takes (alignment, size): the alignment is the 16 in edi.
            if m and not (m.group(2) == "di" and "aligned_alloc" in line):
                size = int(m.group(1), 16)
        if size is None:
            continue
        for ahead in asm[i + 1:i + 16]:
            m = ACTOR.search(ahead)
            if m:
                found[shorten(m.group(1))] = size
                break
    return found


def shorten(symbol: str) -> str:
    """'dpgate::gateway::UpstreamExchange::send(...::...Frame*)' -> 'UpstreamExchange::send'."""
    name = symbol.replace("(anonymous namespace)::", "").split("(", 1)[0]
    return name.replace("dpgate::gateway::", "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(__file__).resolve().parents[3] / "build" / "bin" / "dpgate"
    ap.add_argument("binary", nargs="?", type=Path, default=default)
    ap.add_argument("--all", action="store_true", help="every coroutine, largest first")
    args = ap.parse_args()
    found = frames(args.binary)
    if args.all:
        rows = sorted(found.items(), key=lambda kv: -kv[1])
    else:
        for name in PER_REQUEST:
            if name not in found:
                print(f"     -  {name} (not a coroutine in this binary)")
        rows = [(name, found[name]) for name in PER_REQUEST if name in found]
    over = 0
    for name, size in rows:
        mark = "" if size <= RECYCLED_MAX else f"  over {RECYCLED_MAX}: never in Asio's cache (builds without tcmalloc)"
        over += size > RECYCLED_MAX
        print(f"{size:6d}  {name}{mark}")
    if not args.all:
        print(f"{len(rows)} frames per proxied request, {over} over Asio's recycling limit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
