#!/bin/sh
# Runs the Python worker's test suite (CPU only): sh scripts/pytest.sh [pytest args]
# Uses the repo's .venv when present (scripts/setup-python.sh creates it), else python3.
set -eu
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
# pytest exits 5 when it collects no tests: that is a broken suite here, never a pass.
"$PY" -m pytest test/python -q "$@" || {
  code=$?
  [ "$code" -eq 5 ] && echo "scripts/pytest.sh: no Python tests were collected under test/python" >&2
  exit "$code"
}
