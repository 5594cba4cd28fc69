#!/usr/bin/env bash
# The pyspark minor lines that the full suite does not run (.ci/run runs it on 3.5 and on the newest 4.x):
# for each line, a throwaway venv with the package (editable) and the test references, then the tests
# that touch what differs most between pyspark releases: the Python data source (pyspark 4's
# DataSource API, whose helper signatures change between minor releases), the maintenance planner and
# its unit tests (the clean-install check runs a write/read flow and the planner on 4.1).
#
# Default line: 4.0 (3.5 and the newest 4.x run the full suite; 4.1 runs the clean-install flow at the
# lower bounds of .ci/clean_install_check.sh, with an append and a read through the data source).
# Arguments replace it:
#   .ci/pyspark_lines.sh '==4.0.*' '==4.1.*'
# With PYSPARK_LINES_VENVS=DIR the venvs live in DIR (kept), and `--prepare` only builds them there:
# .ci/run builds them in the background while other stages run, then runs the tests.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO="$(pwd)"
PYTHON="${PYTHON:-python3}"
PREPARE_ONLY=0
if [ "${1:-}" = "--prepare" ]; then
    PREPARE_ONLY=1
    shift
fi
LINES=("$@")
if [ "${#LINES[@]}" -eq 0 ]; then
    LINES=('==4.0.*')
fi
# what each line runs: the data source (pyspark 4's DataSource API, whose helper signatures change
# between minor releases) and the planner's unit tests; the planner's console runs on every plain
# install of .ci/clean_install_check.sh (3.5, the newest 4.x, 4.1 at the lower bounds) and in both
# full suites, so it is not run again here
TESTS=(tests/spark/test_datasource.py tests/unit/test_health.py)
if [ -n "${PYSPARK_LINES_VENVS:-}" ]; then
    WORK="$PYSPARK_LINES_VENVS"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/pyspark-lines.XXXXXX")"
    trap 'rm -rf "$WORK"' EXIT
fi
unset PYTHONPATH PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON SPARK_HOME

status=0
for line in "${LINES[@]}"; do
    started=$(date +%s)
    venv="$WORK/venv$(echo "$line" | tr -c 'A-Za-z0-9.' '_')"
    if [ ! -f "$venv/.ci-ready" ]; then
        printf '\n=== pyspark%s: building %s (%s)\n' "$line" "$venv" "$(date -u +%H:%M:%S)"
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
        if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$REPO[test-references]" \
                "pyspark$line"; then
            echo "pyspark$line: pip install failed" >&2
            status=1
            continue
        fi
        touch "$venv/.ci-ready"
    fi
    if [ "$PREPARE_ONLY" = 1 ]; then
        continue
    fi
    printf '\n=== pyspark%s: data-source and planner tests (%s)\n' "$line" "$(date -u +%H:%M:%S)"
    "$venv/bin/python" -c 'import pyspark; print("pyspark", pyspark.__version__)'
    # the venv's python runs the Spark workers too (PATH's python3 may be another one)
    if PATH="$venv/bin:$PATH" PYSPARK_PYTHON="$venv/bin/python" \
            timeout --signal=INT --kill-after=60 15m "$venv/bin/python" -m pytest -q -p no:cacheprovider \
                --basetemp "$WORK/pytest$(echo "$line" | tr -c 'A-Za-z0-9.' '_')" "${TESTS[@]}"; then
        echo "pyspark$line: OK in $(( $(date +%s) - started ))s"
    else
        echo "pyspark$line: FAILED" >&2
        status=1
    fi
done
exit $status
