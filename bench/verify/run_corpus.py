"""Device script: the whole verification corpus on the GPU, one fresh process per entry.

    python bench/verify/run_corpus.py --out $OUT [--jobs 6]

Tiny-problem entries run in parallel (they barely load the GPU), the seed-problem entries one at a time
(they need tens of GB and their timing must not share the GPU). The three seed transcripts are extracted
(last ```python block defining ModelNew) and classified too: they only have to come out with a verdict,
without crashing the harness. Writes corpus.json (every result, checks and evidence included) and
corpus.txt (the table); prints the table last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "verify"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import corpus  # noqa: E402

SEEDS = {
    "000_510f890c0e824915.txt": "problems/sdpa_fp16.py",
    "002_e7edf580a2003a0e.txt": "problems/sdpa_fp16.py",
    "004_81661164eacd2809.txt": "problems/gemm_bn_scale_softmax.py",
}


def seed_ok(o: corpus.Outcome) -> bool:
    """A seed transcript only has to come out classified: some verdict, no timeout, no harness error."""
    return o.verdict is not None and o.verdict != "timeout" and not (o.reason or "").startswith("harness:")


def extract_seed(path: str, dest: str) -> bool:
    text = open(path, encoding="utf-8", errors="replace").read()
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", text, flags=re.S)
    blocks = [b for b in blocks if "class ModelNew" in b]
    if not blocks:  # an unfenced answer: from the last `import torch` before the last ModelNew to the end
        cls = text.rfind("class ModelNew")
        if cls < 0:
            return False
        start = text.rfind("import torch", 0, cls)
        blocks = [text[start:] if start >= 0 else "import torch\nimport torch.nn as nn\n\n" + text[cls:]]
    with open(dest, "w") as f:
        f.write(blocks[-1])
    return True


def environment() -> dict:
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
        try:
            import subprocess

            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:  # noqa: BLE001
            env["driver"] = None
    return env


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--seeds", default=os.path.join(ROOT, "test", "fixtures", "seeds"))
    parser.add_argument("--only", default="")
    parser.add_argument("--timeout", type=float, default=420)
    parser.add_argument("--deadline", type=float, default=540, help="seconds; entries not started by then are skipped")
    parser.add_argument("--via", choices=["worker", "standalone"], default="worker")
    parser.add_argument("--shard", default="0/1", help="K/N: every N-th entry from the K-th (one shard per GPU, "
                                                       "each run with its own CUDA_VISIBLE_DEVICES); seeds in shard 0")
    parser.add_argument("--reference-process", choices=["on", "off"], default=None,
                        help="force every entry's reference into its own process or beside the candidate "
                             "(default: the worker's default, on)")
    args = parser.parse_args()
    if args.reference_process is not None:
        os.environ["KFORGE_REFERENCE_PROCESS"] = "1" if args.reference_process == "on" else "0"
    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    entries = [e for e in corpus.with_strict_variants(corpus.load_manifest()) if os.path.exists(os.path.join(ROOT, e["candidate"]))
               and (not args.only or any(s in e["id"] for s in args.only.split(",")))]
    shard, shards = (int(x) for x in args.shard.split("/"))
    entries = sorted(entries, key=lambda e: e["id"])[shard::shards]
    small = [e for e in entries if "test/verify/problems/" in e["problem"]]
    large = [e for e in entries if e not in small]
    seed_dir = os.path.abspath(args.seeds)
    seeds = []
    work = "/tmp/kforge_verify_seeds"
    os.makedirs(work, exist_ok=True)
    for name, problem in SEEDS.items():
        src = os.path.join(seed_dir, name)
        dest = os.path.join(work, name.replace(".txt", ".py"))
        if shard == 0 and os.path.exists(src) and extract_seed(src, dest):
            seeds.append({"id": "seed_" + name[:3], "problem": problem, "candidate": dest, "expect": "any",
                          "check": None, "patterns": [], "cpu": False, "time": False, "note": "seed transcript"})
    deadline = started + args.deadline

    def batch(items: list, jobs: int) -> list:
        def one(entry: dict) -> corpus.Outcome:
            if time.time() > deadline:
                return corpus.Outcome(entry, "not_run", [], "device deadline reached before it started", 0.0, None)
            return corpus.run_entry(entry, "cuda", timeout=min(args.timeout, max(30.0, deadline + 60 - time.time())),
                                    via=args.via)

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(one, items))
        for o in done:
            ok = seed_ok(o) if o.entry["expect"] == "any" else o.ok
            print(f"{o.entry['id']:34} {str(o.verdict):14} {'ok' if ok else 'MISS'} {(o.reason or '')[:100]}",
                  flush=True)
        return done

    # Three queues at once: the tiny entries (parallel), the seed-size entries one by one (an attention one
    # needs ~30 GB in the worker, and as much again in its reference process when that is on), the seed
    # transcripts.
    from concurrent.futures import ThreadPoolExecutor

    large = sorted(large, key=lambda e: (not e["id"].startswith("generated"), "sdpa" not in e["problem"], e["id"]))
    with ThreadPoolExecutor(max_workers=3) as queues:
        tiny_f = queues.submit(batch, small, args.jobs)
        large_f = queues.submit(batch, large, 1)
        seed_f = queues.submit(batch, seeds, 3)  # mostly compile errors: CPU-bound, little GPU memory
        finished = tiny_f.result() + large_f.result() + seed_f.result()
    outcomes = [o for o in finished if o.entry["expect"] != "any"]
    seed_outcomes = [o for o in finished if o.entry["expect"] == "any"]
    rows = [o.row() for o in outcomes]
    seed_rows = []
    for o in seed_outcomes:
        r = o.row()
        r["ok"] = seed_ok(o)
        seed_rows.append(r)
    text = corpus.table(outcomes)
    text += "\n\nseed transcripts (must be classified, harness must not crash):\n"
    for r in seed_rows:
        text += f"{r['id']:12} {r['got']:14} {'ok' if r['ok'] else 'MISS'}  {r['reason'][:120]}\n"
    misses = [o for o in outcomes if not o.ok]
    for o in misses:
        text += f"\nMISS {o.entry['id']}: got {o.verdict}, failing {o.failing}\n  reason: {(o.reason or '')[:600]}\n"
    record = {"environment": environment(), "seconds": round(time.time() - started, 1), "entries": rows,
              "seeds": seed_rows, "results": {o.entry["id"]: o.result for o in outcomes + seed_outcomes}}
    with open(os.path.join(args.out, "corpus.json"), "w") as f:
        json.dump(record, f, indent=1, default=str)
    with open(os.path.join(args.out, "corpus.txt"), "w") as f:
        f.write(text + "\n")
    print(json.dumps(record["environment"]))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
