#!/usr/bin/env bash
# The verification corpus on several GPUs of one host in one device call: one run_corpus.py shard per GPU named
# (each with its own CUDA_VISIBLE_DEVICES), entries not started by DEADLINE seconds skipped; CORPUS_ONLY (ids'
# substrings, comma-separated, as run_corpus.py --only) narrows it. Each shard writes
# corpus.json / corpus.txt under $OUT/corpus_K and its log beside; the tables are printed last.
#   bash bench/verify/device_corpus.sh DEADLINE GPU...      e.g.  bash bench/verify/device_corpus.sh 300 0 1 2
set -uo pipefail
cd "$(dirname "$0")/../.."
deadline=$1
shift
n=$#
k=0
for gpu in "$@"; do
  CUDA_VISIBLE_DEVICES=$gpu PYTHONUNBUFFERED=1 python3 bench/verify/run_corpus.py --out "$OUT/corpus_$k" \
    --shard "$k/$n" --jobs 6 --deadline "$deadline" ${CORPUS_ONLY:+--only "$CORPUS_ONLY"} > "$OUT/corpus_$k.log" 2>&1 &
  k=$((k + 1))
done
wait
for ((k = 0; k < n; k++)); do grep -E "MISS|labelled|^seed" "$OUT/corpus_$k/corpus.txt" 2>/dev/null | head -20; done
