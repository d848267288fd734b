#!/usr/bin/env bash
# On the GPU host, in one device call: `kforge optimize` over built-in problems, results streamed into $OUT
# (results.json is rewritten after every problem, so a run cut by its time limit still returns what it did).
# Needs .carry/ from scripts/device-bundle.sh.   bash bench/optimize/device_suite.sh SECONDS problem...
# (a built-in problem's name, or the path of any KernelBench-format file)
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=$1
shift
[ -x /tmp/node ] || { xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node; }
args=()
for p in "$@"; do case "$p" in *.py) args+=("$p") ;; *) args+=("problems/$p.py") ;; esac; done
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
timeout "$limit" /tmp/node .carry/kforge.mjs optimize "${args[@]}" --out-dir /tmp/kf_files --json "$OUT/results.json" \
  --trials 3 --iters 30 --python python3 2>&1 | grep -v '^\[capture' | tee "$OUT/log.txt"
tar czf "$OUT/files.tgz" -C /tmp kf_files 2>/dev/null
