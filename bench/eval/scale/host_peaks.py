"""Issue 17's memory measurement on the host: the verification checks of a problem and a candidate, and what
each check group held above the worker's resident set at the group's start (`peakHostBytes - startHostBytes`), in
multiples of the problem's own forward (its inputs, parameters, outputs and the reference forward's temporaries,
measured once in this process: the resident high-water mark of one forward above the set before it).

    .venv/bin/python bench/eval/scale/host_peaks.py PROBLEM CANDIDATE [--checks a,b] [--out result.json]
    .venv/bin/python bench/eval/scale/host_peaks.py PROBLEM CANDIDATE --cli [--timing]

--cli runs the whole `kforge eval --device cpu` instead (worker and clean reference process), twice: on the problem
and on --baseline-problem (the same problem at a few kB), every process's resident set sampled every 50 ms; what
the worker, the reference process and the two summed at one moment held above the baseline run. Run it on a quiet machine: the peaks do not depend on the load,
the wall times do."""

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


def _rss_kb(pid: int) -> tuple[int, int] | None:
    """(resident set, its shared-memory part: the /dev/shm files both processes map), kB."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "RssShmem:")):
                    found[line.split(":")[0]] = int(line.split()[1])
    except OSError:
        return None
    return (found["VmRSS"], found.get("RssShmem", 0)) if "VmRSS" in found else None


def _descendants(root: int) -> list[tuple[int, str, str]]:
    """(pid, command name, parent's command name) of every process below ``root``."""
    parents: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
        names[int(entry)] = name
    found, stack = [], [root]
    while stack:
        parent = stack.pop()
        for child in parents.get(parent, []):
            found.append((child, names.get(child, "?"), names.get(parent, "?")))
            stack.append(child)
    return found


def sample_cli(problem: str, candidate: str, timing: bool) -> dict:
    """One `kforge eval --device cpu` with every Python process's resident set sampled every 50 ms: the peak of
    the worker (the CLI's Python child), of the clean reference process (the worker's Python child), and of the
    two summed at one moment, in bytes."""
    import time

    with tempfile.TemporaryDirectory() as tmp:
        result_path = os.path.join(tmp, "eval.json")
        cmd = ["node", os.path.join(ROOT, "bin/kforge.js"), "eval", problem, candidate, "--device", "cpu",
               "--python", sys.executable, "--json", result_path, *([] if timing else ["--no-timing"])]
        began = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peaks = {"worker": 0, "reference": 0, "summed": 0, "summedShmOnce": 0}
        while proc.poll() is None:
            now, private, shared = 0, 0, 0
            for pid, name, parent in _descendants(proc.pid):
                rss = _rss_kb(pid) if name.startswith("python") else None
                if rss is None:
                    continue
                role = "reference" if parent.startswith("python") else "worker"
                peaks[role] = max(peaks[role], rss[0] * 1024)
                now += rss[0] * 1024
                private += (rss[0] - rss[1]) * 1024
                shared = max(shared, rss[1] * 1024)
            peaks["summed"] = max(peaks["summed"], now)
            # The shared files counted once: the reference writes its outputs there and the worker maps the same
            # pages (the larger of the two mappings; neither maps shared memory of its own otherwise).
            peaks["summedShmOnce"] = max(peaks["summedShmOnce"], private + shared)
            time.sleep(0.05)
        peaks["wallSeconds"] = time.time() - began
        with open(result_path) as f:
            result = json.load(f)
    entries = result if isinstance(result, list) else result.get("results", [result])
    peaks["stageMemory"] = entries[0].get("stageMemory", {}) if entries else {}
    peaks["verdicts"] = sorted({e.get("verdict", "?") for e in entries})
    peaks["failed"] = [f"{c['name']}: {c['evidence'][:200]}" for e in entries for c in e.get("checks", [])
                       if c.get("outcome") == "fail"]
    timing = entries[0].get("timing") or {} if entries else {}
    peaks["timing"] = {"ref_ms": (timing.get("ref") or {}).get("medianMs"),
                       "ours_ms": (timing.get("cand") or {}).get("medianMs"), "speedup": timing.get("speedup")}
    return peaks


def run_cli(args: argparse.Namespace, own: int) -> dict:
    """The problem's run less the baseline problem's (the same evaluation of a problem of a few kB): what the
    processes held for the problem's data, not for the libraries they loaded."""
    big = sample_cli(args.problem, args.candidate, args.timing)
    base = sample_cli(args.baseline_problem, args.baseline_candidate or args.candidate, args.timing)
    held = {k: big[k] - base[k] for k in ("worker", "reference", "summed", "summedShmOnce")}
    print(f"whole eval: {big['wallSeconds']:.0f} s, verdict {big['verdicts']} (baseline {base['verdicts']}); held "
          "above the baseline problem's run: " + ", ".join(f"{k} {v / 2**20:.0f} MiB ({v / own:.2f}x own)"
                                                            for k, v in held.items()))
    # The worker's stages, each peak above the baseline run's peak in the same stage (stageMemory).
    stages = {}
    for stage, mem in big["stageMemory"].items():
        base_peak = base["stageMemory"].get(stage, {}).get("peakHostBytes")
        if mem.get("peakHostBytes") is not None and base_peak is not None:
            stages[stage] = mem["peakHostBytes"] - base_peak
    for stage, v in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"  worker stage {stage}: {v / 2**20:.0f} MiB ({v / own:.2f}x own)")
    held["stages"] = stages
    for line in big["failed"] + base["failed"]:
        print(f"  failed: {line}")
    return {"run": big, "baseline": base, "heldBytes": held,
            "heldOfOwn": {k: v / own for k, v in held.items() if not isinstance(v, dict)},
            "stagesOfOwn": {k: v / own for k, v in stages.items()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("candidate")
    parser.add_argument("--checks", default=None, help="comma-separated check groups (default: all)")
    parser.add_argument("--out", default=None, help="write the per-group figures as JSON")
    parser.add_argument("--cli", action="store_true", help="the whole kforge eval, every process sampled")
    parser.add_argument("--timing", action="store_true", help="with --cli: time the pair too")
    parser.add_argument("--baseline-problem", help="with --cli: the same problem at a few kB (required with --cli)")
    parser.add_argument("--baseline-candidate", help="with --cli: its candidate (default: CANDIDATE)")
    args = parser.parse_args()
    own, footprint = problem_own_bytes(args.problem)
    if args.cli:
        if not args.baseline_problem:
            sys.exit("host_peaks: --cli needs --baseline-problem (the same problem at a few kB)")
        figures = run_cli(args, own)
        if args.out:
            import datetime
            import platform

            run = figures["run"]
            record = {"device": f"cpu ({platform.node()}, {os.cpu_count()} cores)",
                      "date": datetime.date.today().isoformat(), "problem": args.problem,
                      "variant": f"kforge eval --device cpu, {os.path.basename(args.candidate)}: memory held",
                      **run["timing"], "correct": run["verdicts"] == ["correct"], "ownBytes": own,
                      "footprintBytes": footprint, **figures}
            with open(args.out, "w") as f:
                json.dump(record, f, indent=1)
        return
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
