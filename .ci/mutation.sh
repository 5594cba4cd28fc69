#!/usr/bin/env bash
# Mutation testing of the modules where a bug loses data or breaks the on-disk format, with mutmut 3
# (pip install -e '.[mutation]'; a developer tool, not part of .ci/run).
#
#   .ci/mutation.sh                      every module below
#   .ci/mutation.sh deletion_vector paths   only the modules whose path contains one of the words
#   MUTATION_OUT=/some/dir .ci/mutation.sh   results elsewhere than .mutation/
#   MUTATION_RECHECK=1 .ci/mutation.sh writer   only the mutants that survived the module's last run
#                                          (its .survivors file), against the tests as they are now:
#                                          the check after writing tests for them (results in
#                                          <module>.recheck.*; the last run's files stay)
#
# Each module runs in a scratch copy of the checkout (the working tree is never touched), with only
# the unit tests that cover it, so a mutant costs about a second.  mutmut changes one thing at a time
# (an operator, a constant, a string, a call's argument...) and runs the tests; a mutant that no test
# notices "survived".  Survivors are printed with their diff and listed in $OUT/<module>.survivors;
# the summary line of each module is what docs/testing.md records.  Kill a survivor with a test, or
# list it in docs/testing.md as equivalent (no input tells it apart) with the reason.
# PROCEDURES_MUTATION=1 makes the unit tests start with empty manifest read-plan caches
# (tests/unit/conftest.py), so every test that reads a manifest reaches the plan builders.
#
# Needs the shared reference folder at ../shared (the golden files), like the test suite; the run
# sets CI=true, so a missing reference fails the clean run instead of silently skipping tests.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO="$(pwd)"
OUT="${MUTATION_OUT:-$REPO/.mutation}"
SHARED="$(cd "$REPO/.." && pwd)/shared"

# module -> the unit tests that exercise it (keep each selection small: it runs once per mutant)
MODULES=(
    "procedures/spec/deletion_vector.py|tests/unit/test_roaring_encoding.py tests/unit/test_puffin.py"
    "procedures/core/kernel/paths.py|tests/unit/test_paths.py tests/unit/test_fileio.py tests/unit/test_gc_confinement.py tests/unit/test_remove_orphan_files.py"
    "procedures/core/gc/delete_guard.py|tests/unit/test_gc_confinement.py tests/unit/test_expire_snapshots.py tests/unit/test_remove_orphan_files.py"
    "procedures/core/gc/reachability.py|tests/unit/test_reachability.py tests/unit/test_expire_snapshots.py tests/unit/test_remove_orphan_files.py tests/unit/test_gc_pruning.py"
    "procedures/core/kernel/transaction.py|tests/unit/test_commit_retries.py tests/unit/test_core_commit.py tests/unit/test_fault_points.py"
    "procedures/spec/transforms.py|tests/unit/test_transforms.py tests/unit/test_partitioning.py"
    "procedures/spec/evaluators.py|tests/unit/test_evaluators.py"
    "procedures/spec/projection.py|tests/unit/test_evaluators.py"
    "procedures/spec/puffin.py|tests/unit/test_puffin.py tests/unit/test_table_stats.py"
    "procedures/spec/theta.py|tests/unit/test_table_stats.py"
    "procedures/spec/manifest/avro_container.py|tests/unit/test_avro_container.py tests/unit/test_manifest.py tests/unit/test_corrupt_files.py"
    "procedures/spec/manifest/model.py|tests/unit/test_manifest_model.py tests/unit/test_manifest.py tests/unit/test_manifest_skim.py"
    "procedures/spec/manifest/writer.py|tests/unit/test_manifest_pyiceberg.py tests/unit/test_manifest.py tests/unit/test_manifest_skim.py tests/unit/test_corrupt_files.py"
    "procedures/spec/manifest/reader.py|tests/unit/test_manifest_pyiceberg.py tests/unit/test_manifest.py tests/unit/test_manifest_skim.py tests/unit/test_corrupt_files.py"
    "procedures/spec/manifest/manifest_list.py|tests/unit/test_manifest_pyiceberg.py tests/unit/test_manifest.py tests/unit/test_manifest_list_skim.py tests/unit/test_corrupt_files.py"
)

if ! python -c 'import mutmut' 2>/dev/null; then
    echo "mutmut is not installed in this Python: pip install -e '.[mutation]'" >&2
    exit 2
fi
if [ ! -d "$SHARED/golden/iceberg-java" ]; then
    echo "error: $SHARED/golden/iceberg-java not found: the golden-file tests need the shared folder beside the clone" >&2
    exit 2
fi

selected=()
for entry in "${MODULES[@]}"; do
    module="${entry%%|*}"
    if [ "$#" -eq 0 ]; then
        selected+=("$entry")
        continue
    fi
    for word in "$@"; do
        if [[ "$module" == *"$word"* ]]; then
            selected+=("$entry")
            break
        fi
    done
done
if [ "${#selected[@]}" -eq 0 ]; then
    echo "no module matches: $*" >&2
    exit 2
fi

mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
printf '# %s, commit %s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$(git rev-parse --short HEAD)" >>"$SUMMARY"
for entry in "${selected[@]}"; do
    module="${entry%%|*}"
    read -r -a tests <<<"${entry#*|}"
    name="$(basename "$module" .py)"
    suffix=""
    names=()
    if [ "${MUTATION_RECHECK:-0}" = 1 ]; then
        if [ ! -s "$OUT/$name.survivors" ]; then
            echo "no survivors of a last run of $module in $OUT to re-check" >&2
            continue
        fi
        mapfile -t names < <(cut -d: -f1 "$OUT/$name.survivors")
        suffix=".recheck"
    fi
    scratch="$(mktemp -d "${TMPDIR:-/tmp}/mutation-$name.XXXXXX")"
    # the checkout as it is (committed or not), without build or venv folders
    git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
        [ -f "$f" ] && mkdir -p "$scratch/$(dirname "$f")" && cp -p "$f" "$scratch/$f"
    done
    # mutmut runs the tests from <scratch>/mutants: the references look for ../shared from there
    ln -s "$SHARED" "$scratch/shared"
    {
        printf '\n[tool.mutmut]\n'
        printf 'source_paths = ["procedures"]\n'
        printf 'only_mutate = ["%s"]\n' "$module"
        printf 'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        printf 'pytest_add_cli_args_test_selection = [%s]\n' "$(printf '"%s", ' "${tests[@]}" | sed 's/, $//')"
    } >>"$scratch/pyproject.toml"
    printf '\n=== %s (tests: %s) %s\n' "$module" "${tests[*]}" "$(date -u +%H:%M:%S)"
    started=$(date +%s)
    # PYTHONPATH must not point at the checkout: the mutated copy under mutants/ is the one to import
    (cd "$scratch" && env -u PYTHONPATH CI=true PROCEDURES_MUTATION=1 python -m mutmut run "${names[@]}" \
        >"$OUT/$name$suffix.log" 2>&1) || {
        echo "mutmut failed for $module; see $OUT/$name$suffix.log" >&2
        tail -20 "$OUT/$name$suffix.log" >&2
        exit 1
    }
    name="$name$suffix"
    (cd "$scratch" && env -u PYTHONPATH python -m mutmut results --all true 2>/dev/null) >"$OUT/$name.results"
    if [ -n "$suffix" ]; then  # only the re-checked mutants
        grep -F -f <(printf ' %s:\n' "${names[@]}") "$OUT/$name.results" >"$OUT/$name.results.tmp" || true
        mv "$OUT/$name.results.tmp" "$OUT/$name.results"
    fi
    grep -v ': killed$' "$OUT/$name.results" | awk -F: 'NF > 1 {gsub(/^ +/, "", $1); print $1 ":" $2}' \
        >"$OUT/$name.survivors" || true
    : >"$OUT/$name.diffs"
    while IFS=: read -r mutant status; do
        { printf '### %s (%s)\n' "$mutant" "${status# }"
          (cd "$scratch" && env -u PYTHONPATH python -m mutmut show "$mutant" 2>/dev/null) | grep '^[-+][^-+]' || true
        } >>"$OUT/$name.diffs"
    done <"$OUT/$name.survivors"
    total=$(grep -c ': ' "$OUT/$name.results" || true)
    killed=$(grep -c ': killed$' "$OUT/$name.results" || true)
    timeouts=$(grep -c ': timeout$' "$OUT/$name.results" || true)
    survived=$(grep -c ': survived$' "$OUT/$name.results" || true)
    untested=$(grep -c ': no tests$' "$OUT/$name.results" || true)
    line=$(printf '%-40s%s mutants %4d  killed %4d  timeout %3d  survived %3d  no tests %3d  (%ds)' \
        "$module" "$suffix" "$total" "$killed" "$timeouts" "$survived" "$untested" "$(( $(date +%s) - started ))")
    echo "$line" | tee -a "$SUMMARY"
    rm -rf "$scratch"
done
printf '\nsummary in %s; surviving mutants with their diffs in %s/<module>.diffs\n' "$SUMMARY" "$OUT"
