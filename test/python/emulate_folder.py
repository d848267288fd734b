"""The emulated fast paths (kernel_emulator.py) of `kforge optimize` output for any folder of KernelBench-format
problems, on the CPU: each region's generated Python and functor math against the reference's ops, as the heavy
test does for the built-in problems (test_optimize_builtin.py: the same smaller instance, calls and tolerances).

    node --import tsx src/cli/main.ts optimize PROBLEMS_DIR --no-verify --out-dir EMITTED_DIR
    .venv/bin/python test/python/emulate_folder.py PROBLEMS_DIR EMITTED_DIR [NAME_SUBSTRING ...]

One line per problem: OK (with the regions whose fast path never ran, if any), SKIP (no generated CUDA, or no
instance within the CPU budget), FAIL with the first mismatch. A FAIL is a lead, not a verdict: a reference
that is itself far from float64 (a BatchNorm over two values per channel) differs from any other rounding.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "python"))

import test_optimize_builtin as builtin  # noqa: E402


def emulate(problem_path: Path, emitted_path: Path) -> str:
    cand = builtin._load(emitted_path)
    if not getattr(cand, "_KF_CUDA_SOURCE", None):
        return "SKIP no generated CUDA"
    text = emitted_path.read_text(encoding="utf8")
    idle, _ = builtin.emulated_fast_paths(builtin._load(problem_path), cand, text, problem_path.stem)
    if idle is None:
        return "OK (an export-captured graph at other shapes: the reference's forward ran)"
    return "OK" + (f" — never ran: {', '.join(idle)}" if idle else "")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems, emitted, only = Path(argv[0]), Path(argv[1]), argv[2:]
    failed = 0
    for problem_path in sorted(problems.glob("*.py")):
        if only and not any(s in problem_path.stem for s in only):
            continue
        emitted_path = emitted / f"{problem_path.stem}_new.py"
        if not emitted_path.exists():
            line = "SKIP not emitted"
        else:
            try:
                line = emulate(problem_path, emitted_path)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # noqa: BLE001 — one problem's failure is reported, the sweep goes on
                if type(exc).__name__ == "Skipped":  # pytest.skip from the instance planner (a BaseException)
                    line = f"SKIP {exc}"
                else:
                    failed += 1
                    line = f"FAIL {type(exc).__name__}: {' '.join(str(exc).split())[:400]}"
        print(f"{problem_path.stem}: {line}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
