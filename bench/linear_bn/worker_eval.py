"""Runs the kforge worker (python -m kforge_worker, what `kforge eval` starts on a GPU host) on the
generated ModelNew for problems/gemm_bn_scale_softmax.py, in PyTorch's default fp32 mode and with
torch.backends.cuda.matmul.allow_tf32 = True, and writes each EvalResult to --out.

Usage on the device:  python3 bench/linear_bn/worker_eval.py --out $OUT
"""

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROBLEM = "problems/gemm_bn_scale_softmax.py"
CANDIDATE = "generated/linear_bn_softmax/model_new.py"

# The worker has no TF32 switch: set PyTorch's flag in the worker process before it starts, so the
# reference and the candidate both see allow_tf32 = True.
TF32_LAUNCHER = (
    "import runpy, sys, torch; torch.backends.cuda.matmul.allow_tf32 = True; "
    "sys.argv = ['kforge_worker'] + sys.argv[1:]; runpy.run_module('kforge_worker', run_name='__main__')"
)


def request(cache_dir):
    return {
        "protocol": 1,
        "problem": {"path": PROBLEM, "name": "gemm_bn_scale_softmax", "atol": None, "rtol": None},
        "candidate": {
            "path": CANDIDATE,
            "label": "linear_bn_softmax",
            "origin": {"kind": "file", "sourcePath": CANDIDATE, "blockIndex": None, "blockCount": None, "note": None},
        },
        "options": {
            "trials": 5,
            "seed": 0,
            "precision": None,
            "device": "cuda",
            "timing": {
                "enabled": True,
                "warmupIters": 5,
                "minIters": 20,
                "maxIters": 200,
                "budgetSeconds": 8,
                "targetRelativeCi": 0.01,
            },
            "cacheDir": cache_dir,
            "checks": [],
        },
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/lbs_out"))
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    summary = {}
    for mode in ("fp32", "tf32"):
        req_path = os.path.join(args.out, f"worker_request_{mode}.json")
        with open(req_path, "w") as f:
            json.dump(request("/tmp/kforge-cache"), f)
        cmd = [sys.executable, "-m", "kforge_worker", "--request", req_path]
        if mode == "tf32":
            cmd = [sys.executable, "-c", TF32_LAUNCHER, "--request", req_path]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=500, check=False)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        results = [m["result"] for m in lines if m.get("type") == "result"]
        result = results[-1] if results else {"error": proc.stderr[-3000:]}
        with open(os.path.join(args.out, f"worker_result_{mode}.json"), "w") as f:
            json.dump(result, f, indent=1)
        timing = result.get("timing") or {}
        summary[mode] = {
            "verdict": result.get("verdict"),
            "reason": result.get("reason"),
            "speedup": timing.get("speedup"),
            "keys": sorted(result.keys()) if isinstance(result, dict) else None,
        }
        print(f"worker [{mode}]", json.dumps(summary[mode])[:1500], flush=True)
    return summary


if __name__ == "__main__":
    main()
