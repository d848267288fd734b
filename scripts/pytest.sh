#!/bin/sh
# Runs the Python worker's test suite (CPU only): sh scripts/pytest.sh [pytest args]
# Uses the repo's .venv when present (scripts/setup-python.sh creates it), else python3.
# Without arguments, and with pytest-xdist installed, the suite runs in two passes: the files that time nothing
# (conftest.py's PARALLEL_FILES: compiles, captures, code generation) two at a time, then the rest one test at
# a time (timed evaluations and the verify corpus keep CI's two cores to themselves). With arguments: one
# plain pytest run of exactly what was asked (the files named, or the whole folder filtered by the options).
set -eu
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3

# The suite's folder unless the arguments name test files or folders themselves (then exactly those run).
where=test/python
for arg in "$@"; do
  case "$arg" in
    -*) ;;
    *) [ -e "${arg%%::*}" ] && where="" ;;
  esac
done

# pytest exits 5 when it collects no tests: that is a broken suite here, never a pass.
run_pytest() {
  code=0
  # shellcheck disable=SC2086 # an empty $where is no argument
  "$PY" -m pytest $where -q "$@" || code=$?
  [ "$code" -eq 5 ] && echo "scripts/pytest.sh: no Python tests were collected ($where $*)" >&2
  return "$code"
}

if [ "$#" -eq 0 ] && "$PY" -c 'import xdist' 2>/dev/null; then
  first=0
  # --durations: CI's log names the slowest tests of each pass (CI has a 20-minute budget to keep)
  run_pytest -n 2 --dist loadfile -m "parallel and not heavy" --durations=30 || first=$?
  run_pytest -m "not parallel and not heavy" --durations=30 || exit $?
  exit "$first"
fi
run_pytest "$@"
