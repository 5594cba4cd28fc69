#!/usr/bin/env bash
# Clean-install check: for each run, a throwaway venv, `pip install <repo>` (not editable, no extras) plus
# only the given pyspark, then .ci/clean_install_flow.py (create a table, three inserts,
# rewrite_data_files, expire_snapshots, read back, one procedures-sql command) with the Spark Python
# workers on the venv's python.  An import the package does not declare fails the flow.
#
# Default runs: the newest pyspark 3.5.x and the newest 4.x (4.1 or newer) with whatever pip picks for
# the other dependencies, then pyspark 4.1 with every other dependency at its declared lower bound
# (.ci/lower_bounds.txt).  Arguments replace them: each is a pyspark specifier, optionally followed by
# "@" and a pip constraints file:
#   .ci/clean_install_check.sh '==3.5.*'  '==4.1.*@.ci/lower_bounds.txt'
# The first run also executes docs/maintenance.ipynb in its venv (.ci/run_notebook.py).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO="$(pwd)"
PYTHON="${PYTHON:-python3}"
LINES=("$@")
if [ "${#LINES[@]}" -eq 0 ]; then
    LINES=('==3.5.*' '>=4.1,<5' '==4.1.*@.ci/lower_bounds.txt')
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/clean-install.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
# the checkout must not leak into the venv: no PYTHONPATH, no source tree on sys.path
unset PYTHONPATH PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON SPARK_HOME

status=0
for run in "${LINES[@]}"; do
    started=$(date +%s)
    line="${run%%@*}"
    constraints=()
    if [ "$run" != "$line" ]; then
        constraints=(--constraint "${run#*@}")
    fi
    name="$(echo "$run" | tr -c 'A-Za-z0-9.' '_')"
    venv="$WORK/venv$name"
    run_dir="$WORK/run$name"
    mkdir -p "$run_dir"
    printf '\n=== clean install: pip install %s "pyspark%s" %s (%s)\n' "$REPO" "$line" "${constraints[*]:-}" "$(date -u +%H:%M:%S)"
    "$PYTHON" -m venv "$venv"
    if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check ${constraints[@]+"${constraints[@]}"} "$REPO" "pyspark$line"; then
        echo "clean install with pyspark$run: pip install failed" >&2
        status=1
        continue
    fi
    "$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
        | grep -iE '^(pyspark|py4j|pyarrow|numpy|pandas|fastavro|mmh3|pyroaring|protobuf|iceberg-procedures) ' | tr -s ' ' | paste -sd ';' -
    if (cd "$run_dir" && PYSPARK_PYTHON="$venv/bin/python" timeout 600 "$venv/bin/python" -I "$REPO/.ci/clean_install_flow.py"); then
        echo "clean install with pyspark$run: OK in $(( $(date +%s) - started ))s"
    else
        echo "clean install with pyspark$run: FAILED" >&2
        status=1
        continue
    fi
    if [ "$run" = "${LINES[0]}" ]; then
        # the walk-through notebook on the plain install (no stats/report extras): a notebook runner
        # beside the package, not a dependency of it
        nb_dir="$WORK/notebook$name"
        mkdir -p "$nb_dir"
        if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check nbclient nbformat ipykernel \
                && (cd "$nb_dir" && PYSPARK_PYTHON="$venv/bin/python" timeout 900 "$venv/bin/python" \
                    "$REPO/.ci/run_notebook.py" "$REPO/docs/maintenance.ipynb"); then
            echo "docs/maintenance.ipynb on the plain install with pyspark$run: OK"
        else
            echo "docs/maintenance.ipynb on the plain install with pyspark$run: FAILED" >&2
            status=1
        fi
    fi
done
exit $status
