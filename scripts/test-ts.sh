#!/bin/sh
# The TypeScript tests: sh scripts/test-ts.sh [test files]
# Without arguments: the files below that time nothing (no timed evaluation, no measured schedule), two at a
# time, then every other test file one at a time as before — a timed worker run or a simulated GPU schedule
# must not share CI's two cores with a neighbour. A new file runs one at a time until it is listed here.
# With files: exactly those, one at a time.
set -eu
cd "$(dirname "$0")/.."
export KFORGE_PYTHON="${KFORGE_PYTHON:-.venv/bin/python}"
if [ "$#" -gt 0 ]; then
  exec node --import tsx --test "$@"
fi

PARALLEL="test/capture.test.ts test/cli.test.ts test/emit.test.ts test/extract.test.ts test/format-doctor.test.ts
  test/inputs.test.ts test/interrupt.test.ts test/optimize-codegen.test.ts test/optimize-recipe-rules.test.ts
  test/optimize-graph-replay.test.ts test/optimize-new-ops.test.ts test/optimize-rules.test.ts test/problem-device.test.ts test/report-browser.test.ts test/report-messages.test.ts
  test/report.test.ts test/stack-dump.test.ts test/suite-extension-cache.test.ts test/suite-prebuild.test.ts test/suite-setup.test.ts"
parallel=""
serial=""
for file in test/*.test.ts; do
  case " $(echo $PARALLEL) " in *" $file "*) parallel="$parallel $file" ;; *) serial="$serial $file" ;; esac
done

first=0
# shellcheck disable=SC2086 # word splitting of the file lists is intended
node --import tsx --test --test-concurrency=2 $parallel || first=$?
# shellcheck disable=SC2086
node --import tsx --test $serial || exit $?
exit "$first"
