#!/usr/bin/env bash
# Creates .venv with what the worker's tests need on a CPU-only machine: CPU torch, numpy, pytest (+ xdist), ninja,
# and the CUDA runtime/cuBLAS/cuSPARSE headers (nvidia-* wheels) so emitted CUDA can be compile-checked
# with nvcc. Idempotent: a second run only verifies. GPU hosts do not need this (kforge uses their python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -d /opt/pypi/simple ] && [ -z "${PIP_INDEX_URL:-}" ]; then
  # This workplace's offline package mirror: without it pip would wait on an unreachable index first.
  export PIP_INDEX_URL=file:///opt/pypi/simple
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# pytest-xdist: scripts/pytest.sh runs the files that time nothing two at a time.
if ! .venv/bin/python -c 'import torch, numpy, pytest, ninja, xdist' 2>/dev/null; then
  .venv/bin/python -m pip install -q --disable-pip-version-check torch numpy pytest ninja pytest-xdist
fi
if ! .venv/bin/python -c 'import nvidia.cu13' 2>/dev/null; then
  .venv/bin/python -m pip install -q --disable-pip-version-check nvidia-cuda-runtime nvidia-cublas nvidia-cusparse
fi
# Ray serves only `kforge eval/bench --ray`; the test venv has it so the Ray end-to-end test runs (a few seconds
# from the package mirror). GPU hosts install it themselves only if they use --ray.
if ! .venv/bin/python -c 'import ray' 2>/dev/null; then
  .venv/bin/python -m pip install -q --disable-pip-version-check ray
fi
# The worker's bytecode, compiled once: where PYTHONDONTWRITEBYTECODE is set (CI's machine sets it), every worker
# and reference process the tests start would otherwise compile python/ from source again.
.venv/bin/python -m compileall -q python >/dev/null
.venv/bin/python -c 'import torch; print("python venv ready: torch", torch.__version__)'
