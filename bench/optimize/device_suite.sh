#!/usr/bin/env bash
# On the GPU host: runs `kforge optimize` over problems in the background (setsid, so it outlives the device
# call) and collects what it has so far. Needs .carry/ from scripts/device-bundle.sh.
#   bash bench/optimize/device_suite.sh start NAME problem...   # launches; returns at once
#   bash bench/optimize/device_suite.sh collect NAME            # copies log + JSON + emitted files to $OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
action=$1 name=$2
shift 2
dir=/tmp/kf_suite_$name
case "$action" in
start)
  mkdir -p "$dir"
  [ -x /tmp/node ] || { xz -dc .carry/node.xz > /tmp/node && chmod +x /tmp/node; }
  args=()
  for p in "$@"; do args+=("problems/$p.py"); done
  setsid nohup /tmp/node .carry/kforge.mjs optimize "${args[@]}" --out-dir "$dir/files" --json "$dir/results.json" \
    --trials 3 --iters 30 --python python3 > "$dir/log.txt" 2>&1 < /dev/null &
  echo "started $name: ${#args[@]} problems"
  ;;
collect)
  cp "$dir/log.txt" "$dir/results.json" "$OUT/" 2>/dev/null
  tar czf "$OUT/files_$name.tgz" -C "$dir" files 2>/dev/null
  tail -40 "$dir/log.txt"
  ;;
esac
