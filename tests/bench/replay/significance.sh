#!/bin/sh
# Prints, per cell, how sure each of dpgate's mean-TTFT differences is:
# dpgate minus a peer, with a 95 % block-bootstrap interval over 30 s windows
# of trace time (compare_runs.py). Usage: significance.sh BUILD_DIR [TRACE] [extra dpgate-replay args]
set -eu
here=$(dirname "$0")
build=${1:?build dir}
# The trace lives in ../shared beside the repository (never vendored).
root=$(cd "$(dirname "$0")/../../.." && pwd)
trace=${2:-$root/../shared/traces/mooncake_synthetic_trace.jsonl}
shift $(( $# >= 2 ? 2 : 1 ))
peers=${PEERS:-cache-aware cache-aware-blocks least-loaded}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| N | X | dpgate minus | mean diff ms | 95% interval | dpgate lower in | verdict |"
echo "|---|---|---|---|---|---|---|"
for n in 1024 8192; do
  for x in 1 8; do
    for p in dpgate $peers; do
      "$build/bin/dpgate-replay" --trace "$trace" --slots 16 --cache-blocks "$n" --speedup "$x" --policy "$p" \
        --per-request "$tmp/$p.csv" "$@" >/dev/null
    done
    for p in $peers; do
      python3 "$here/compare_runs.py" "$tmp/dpgate.csv" "$tmp/$p.csv" | tail -1 |
        python3 -c 'import json,sys; d=json.load(sys.stdin); n,x,p=sys.argv[1:]; print("| %s | %s | %s | %+.2f | [%+.2f, %+.2f] | %.0f%% | %s |" % (n, x, p, d["mean_diff_ms"], d["ci95_ms"][0], d["ci95_ms"][1], 100*d["a_lower_share"], d["verdict"].replace("A lower", "dpgate lower").replace("B lower", p + " lower")))' "$n" "$x" "$p"
    done
  done
done
