#!/usr/bin/env bash
# The bench half of device_eval.sh alone: every included and generated candidate of the built-in problems.
set -uo pipefail
cd "$(dirname "$0")/../.."
xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3} KFORGE_CACHE_DIR=/tmp/kforge-cache NO_COLOR=1
ev=/tmp/evidence && rm -rf "$ev" && mkdir -p "$ev"
/tmp/node .carry/kforge.mjs bench --records "$ev/records" --json "$ev/bench.json" --html "$ev/bench.html" \
  --timeout 300 --budget 20 "$@" 2> "$ev/bench.log" | tee "$ev/bench.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$ev/gpu.csv" 2>&1
tar -C /tmp -czf "$OUT/evidence.tgz" evidence
