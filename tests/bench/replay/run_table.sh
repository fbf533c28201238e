#!/bin/sh
# Prints the routing-quality table (markdown) for every policy at
# N = 1024, 8192 and X = 1, 8. Usage: run_table.sh BUILD_DIR [TRACE] [extra dpgate-replay args]
set -eu
build=${1:?build dir}
# The trace lives in ../shared beside the repository (never vendored).
root=$(cd "$(dirname "$0")/../../.." && pwd)
trace=${2:-$root/../shared/traces/mooncake_synthetic_trace.jsonl}
shift $(( $# >= 2 ? 2 : 1 ))
echo "| N | X | policy | hit_ratio | bound | hit/bound | ttft_mean_ms | ttft_p99_ms | work_imbalance |"
echo "|---|---|---|---|---|---|---|---|---|"
for n in 1024 8192; do
  for x in 1 8; do
    for p in ${POLICIES:-round-robin least-loaded first-block-hash cache-aware cache-aware-blocks dpgate}; do
      "$build/bin/dpgate-replay" --trace "$trace" --slots 16 --cache-blocks "$n" --speedup "$x" --policy "$p" "$@" |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print("| %d | %g | %s | %.3f | %.3f | %.2f | %.1f | %.1f | %.3f |" % (d["cache_blocks"], d["speedup"], d["policy"], d["hit_ratio"], d["bound_hit_ratio"], d["hit_ratio"]/d["bound_hit_ratio"], d["ttft_mean_ms"], d["ttft_p99_ms"], d["work_imbalance"]))'
    done
  done
done
