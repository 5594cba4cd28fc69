#!/usr/bin/env bash
# Clean-install check: for each supported pyspark line, a throwaway venv, `pip install <repo>` (not
# editable, no extras) plus only that pyspark, then .ci/clean_install_flow.py (create a table, three
# inserts, rewrite_data_files, expire_snapshots, read back, one procedures-sql command) with the Spark
# Python workers on the venv's python.  An import the package does not declare fails the flow.
#
#   .ci/clean_install_check.sh                  # pyspark 3.5.x and 4.x (newest of each line)
#   .ci/clean_install_check.sh '==3.5.*'        # one line only
# PIP_CONSTRAINT=file (pip's own variable) pins other packages, e.g. to check the lower bounds.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO="$(pwd)"
PYTHON="${PYTHON:-python3}"
LINES=("$@")
if [ "${#LINES[@]}" -eq 0 ]; then
    LINES=('==3.5.*' '>=4.1,<5')
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/clean-install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# the checkout must not leak into the venv: no PYTHONPATH, no source tree on sys.path
unset PYTHONPATH PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON SPARK_HOME

status=0
for line in "${LINES[@]}"; do
    started=$(date +%s)
    name="$(echo "$line" | tr -c 'A-Za-z0-9.' '_')"
    venv="$WORK/venv$name"
    run_dir="$WORK/run$name"
    mkdir -p "$run_dir"
    printf '\n=== clean install: pip install %s "pyspark%s" (%s)\n' "$REPO" "$line" "$(date -u +%H:%M:%S)"
    "$PYTHON" -m venv "$venv"
    if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$REPO" "pyspark$line"; then
        echo "clean install with pyspark$line: pip install failed" >&2
        status=1
        continue
    fi
    "$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
        | grep -iE '^(pyspark|py4j|pyarrow|numpy|pandas|fastavro|mmh3|iceberg-procedures) ' | tr -s ' ' | paste -sd ';' -
    if (cd "$run_dir" && PYSPARK_PYTHON="$venv/bin/python" timeout 600 "$venv/bin/python" -I "$REPO/.ci/clean_install_flow.py"); then
        echo "clean install with pyspark$line: OK in $(( $(date +%s) - started ))s"
    else
        echo "clean install with pyspark$line: FAILED" >&2
        status=1
    fi
done
exit $status
