#!/usr/bin/env bash
# Issue 17's measurement on the GPU host: a full `kforge eval` (default trials, every check, timing) of an identity
# candidate on each large problem of this folder, with its wall time and peak memory (GPU: nvidia-smi polled every
# 200 ms; host: the largest process's max RSS from GNU time). Needs .carry/ from scripts/device-bundle.sh.
#   bash bench/eval/scale/device_scale.sh SECONDS_PER_EVAL [problem ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
per=$1
shift
[ -x /tmp/node ] || { xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node; }
export KFORGE_PYTHON=python3 NO_COLOR=1
dir=bench/eval/scale
for p in "${@:-elementwise_large_fp32 softmax_large_rows sdpa_fp32_large}"; do
  for name in $p; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/$name.gpumem" &
    smi=$!
    start=$(date +%s.%N)
    /usr/bin/time -v -o "$OUT/$name.time" timeout "$per" /tmp/node .carry/kforge.mjs eval "$dir/$name.py" \
      "$dir/${name}__identity.py" --json "$OUT/$name.json" > "$OUT/$name.txt" 2> "$OUT/$name.log"
    rc=$?
    end=$(date +%s.%N)
    kill $smi
    peak=$(sort -n "$OUT/$name.gpumem" | tail -1)
    rss=$(grep "Maximum resident" "$OUT/$name.time" | awk '{print $NF}')
    printf '%s rc=%s wall=%.1fs gpu_peak_mib=%s host_max_rss_kb=%s\n' "$name" "$rc" "$(python3 -c "print($end - $start)")" \
      "$peak" "$rss" | tee -a "$OUT/summary.txt"
    tail -25 "$OUT/$name.txt"
  done
done
