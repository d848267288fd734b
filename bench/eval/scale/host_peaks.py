"""Issue 17's memory measurement on the host: the verification checks of a problem and a candidate, and what
each check group held above the worker's resident set at the group's start (`peakHostBytes - startHostBytes`), in
multiples of the problem's own forward (its inputs, parameters, outputs and the reference forward's temporaries,
measured once in this process: the resident high-water mark of one forward above the set before it).

    .venv/bin/python bench/eval/scale/host_peaks.py PROBLEM CANDIDATE [--checks a,b] [--out result.json]

Run it on a quiet machine: the peaks are the worker's own, but the wall times are not."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def problem_own_bytes(path: str) -> tuple[int, int]:
    """(the problem's own forward: inputs and model built, one call, its high-water mark above the set before; the
    footprint: inputs + parameters + outputs), bytes."""
    import torch

    spec = importlib.util.spec_from_file_location("problem_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.ones(1 << 16).sum()  # the allocator and the thread pool, before the baseline
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status("VmRSS:")
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad():
        out = model(*inputs)
    own = _status("VmHWM:") - before
    outs = out if isinstance(out, (list, tuple)) else [out]
    tensors = [t for t in [*inputs, *outs, *model.parameters(), *model.buffers()] if isinstance(t, torch.Tensor)]
    return own, sum(t.numel() * t.element_size() for t in tensors)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("candidate")
    parser.add_argument("--checks", default=None, help="comma-separated check groups (default: all)")
    parser.add_argument("--out", default=None, help="write the per-group figures as JSON")
    args = parser.parse_args()
    own, footprint = problem_own_bytes(args.problem)
    with tempfile.TemporaryDirectory() as tmp:
        result_path = os.path.join(tmp, "eval.json")
        # The checks' entry point without the CLI (one process; the check groups' copies are the same code the
        # CLI's worker runs): a group can be measured alone.
        cmd = [sys.executable, "-m", "kforge_worker.checks.standalone", "--problem", args.problem, "--candidate",
               args.candidate, "--device", "cpu", "--out", result_path]
        if args.checks:
            cmd += ["--checks", args.checks]
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if not os.path.exists(result_path):
            sys.exit(f"host_peaks: kforge eval wrote no result (exit {done.returncode}): {done.stderr[-400:]}")
        with open(result_path) as f:
            result = json.load(f)
    entries = result if isinstance(result, list) else result.get("results", [result])
    checks = [c for e in entries for c in e.get("checks", [])]
    groups: dict[tuple[int, int], list[str]] = {}
    for c in checks:
        if c.get("peakHostBytes") is not None and c.get("startHostBytes") is not None:
            groups.setdefault((c["peakHostBytes"], c["startHostBytes"]), []).append(c["name"])
    rows = []
    for (peak, start), names in groups.items():
        held = peak - start
        rows.append({"checks": names, "heldBytes": held, "ofOwn": held / own, "startBytes": start})
    rows.sort(key=lambda r: -r["heldBytes"])
    verdicts = sorted({e.get("verdict", "?") for e in entries})
    print(f"problem's own forward {own / 2**20:.0f} MiB (footprint {footprint / 2**20:.0f} MiB); verdict {verdicts}")
    for r in rows:
        print(f"{r['heldBytes'] / 2**20:8.0f} MiB  {r['ofOwn']:5.2f}x own  {', '.join(r['checks'][:4])}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"problem": args.problem, "candidate": args.candidate, "ownBytes": own,
                       "footprintBytes": footprint, "verdicts": verdicts, "groups": rows}, f, indent=1)


if __name__ == "__main__":
    main()
