#!/usr/bin/env bash
# Issue-2 evidence on the GPU host: kforge itself (the bundled CLI, carried node) benches every included and
# generated candidate of the built-in problems and evaluates the seed transcripts. Needs .carry/ from
# scripts/device-bundle.sh. Everything lands in $OUT/evidence.tgz plus a summary on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node
export KFORGE_PYTHON=${KFORGE_PYTHON:-python3} KFORGE_CACHE_DIR=/tmp/kforge-cache NO_COLOR=1
ev=/tmp/evidence && rm -rf "$ev" && mkdir -p "$ev"
kforge() { /tmp/node .carry/kforge.mjs "$@"; }
kforge doctor | tee "$ev/doctor.txt"
kforge bench --records "$ev/records" --json "$ev/bench.json" --html "$ev/bench.html" --timeout 300 --budget 20 \
  2> "$ev/bench.log" | tee "$ev/bench.txt"
seeds=test/fixtures/seeds
kforge eval sdpa_fp16 "$seeds/000_510f890c0e824915.txt" "$seeds/002_e7edf580a2003a0e.txt" --timeout 240 \
  --budget 10 --json "$ev/seeds_sdpa.json" 2> "$ev/seeds_sdpa.log" | tee "$ev/seeds_sdpa.txt"
kforge eval gemm_bn_scale_softmax "$seeds/004_81661164eacd2809.txt" --timeout 240 --budget 10 \
  --json "$ev/seeds_gemm.json" 2> "$ev/seeds_gemm.log" | tee "$ev/seeds_gemm.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$ev/gpu.csv" 2>&1
python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' > "$ev/torch.txt"
tar -C /tmp -czf "$OUT/evidence.tgz" evidence
