#!/usr/bin/env bash
# Issue 17's suite measurement on one GPU, in one device call: the ModelNew files `kforge optimize --no-verify`
# emits for the given problems, evaluated as one suite by `kforge bench --pairs` from a COLD extension cache
# (the prebuild pool compiles while the GPU verifies; the next worker starts ahead). The journal (each result
# with its stage times, slot, start and finish), JSON, log and the wall go to $OUT; bench/scale/suite_record.py
# turns them into the record (wall against the sum of the GPU phases). Needs .carry/ from scripts/device-bundle.sh.
#   bash bench/scale/device_suite.sh SECONDS problem...
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=$1
shift
[ -x /tmp/node ] || { xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node; }
export KFORGE_PYTHON=python3 NO_COLOR=1 KFORGE_CACHE_DIR=/tmp/kf_suite_cache
rm -rf "$KFORGE_CACHE_DIR"
work=/tmp/kf_suite
mkdir -p "$work/files"
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw --format=csv,noheader | tee "$OUT/gpus.txt"
nproc | tee "$OUT/nproc.txt"
/tmp/node .carry/kforge.mjs optimize "$@" --no-verify --out-dir "$work/files" --json "$work/emit.json" > "$OUT/emit.txt" 2>&1
for p in "$@"; do
  [ -f "$work/files/${p}_new.py" ] && echo "$p=$work/files/${p}_new.py"
done > "$OUT/pairs.txt"
start=$(date +%s.%N)
timeout "$limit" /tmp/node .carry/kforge.mjs bench --pairs "$OUT/pairs.txt" --gpus 1 --trials 3 --budget 1.5 \
  --jsonl "$OUT/suite.jsonl" --json "$OUT/suite.json" > "$OUT/suite.txt" 2> "$OUT/suite.log"
rc=$?
echo "suite rc=$rc wall $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s" | tee "$OUT/wall.txt"
tail -8 "$OUT/suite.txt"
