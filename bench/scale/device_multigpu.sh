#!/usr/bin/env bash
# Issue 18's run on a multi-GPU host, in one device call: the same suite (built-in problems with the ModelNew files
# `kforge optimize` emits for them) through `kforge bench --pairs`, first on 1 GPU, then on every GPU. Extensions
# are built once beforehand into the shared cache, so both runs start equally warm and differ only in placement.
# Journals (slot, start, end of each candidate), JSON results and logs go to $OUT; bench/scale/multigpu_record.py
# turns them into the record. Needs .carry/ from scripts/device-bundle.sh.
#   bash bench/scale/device_multigpu.sh SECONDS_1GPU SECONDS_ALL problem...
set -uo pipefail
cd "$(dirname "$0")/../.."
limit_1=$1
limit_all=$2
shift 2
[ -x /tmp/node ] || { xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node; }
export KFORGE_PYTHON=python3 NO_COLOR=1 KFORGE_CACHE_DIR=/tmp/kf_cache
# Pinned for every build (prebuild and workers alike), so the warm-up's builds are the ones the runs load.
export TORCH_CUDA_ARCH_LIST=9.0
work=/tmp/kf_multigpu
mkdir -p "$work/files"
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw --format=csv,noheader | tee "$OUT/gpus.txt"
/tmp/node .carry/kforge.mjs optimize "$@" --no-verify --out-dir "$work/files" --json "$work/emit.json" > "$OUT/emit.txt" 2>&1
for p in "$@"; do
  [ -f "$work/files/${p}_new.py" ] && echo "$p=files/${p}_new.py"
done > "$work/pairs.txt"
cp "$work/pairs.txt" "$OUT/"
start=$(date +%s.%N)
cut -d= -f2 "$work/pairs.txt" | sed "s|^|$work/|" | CUDA_VISIBLE_DEVICES= PYTHONPATH=python \
  xargs -P 32 -I{} python3 -m kforge_worker --build {} --cache-dir "$KFORGE_CACHE_DIR" > "$OUT/prebuild.txt" 2>&1
echo "prebuild $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s" | tee "$OUT/walls.txt"
for gpus in 1 all; do
  limit=limit_$gpus
  start=$(date +%s.%N)
  timeout "${!limit}" /tmp/node .carry/kforge.mjs bench --pairs "$work/pairs.txt" --gpus "$gpus" --trials 3 --budget 1.5 \
    --jsonl "$OUT/gpus_$gpus.jsonl" --json "$OUT/gpus_$gpus.json" > "$OUT/gpus_$gpus.txt" 2> "$OUT/gpus_$gpus.log"
  rc=$?
  echo "gpus_$gpus rc=$rc $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s" | tee -a "$OUT/walls.txt"
  tail -5 "$OUT/gpus_$gpus.txt"
done
