"""rewrite_data_files / rewrite_position_delete_files planning: options (Java 1.10's names, defaults and
messages), sizing arithmetic, candidate files, bin packing, group rules, job order and the z-order key."""

from __future__ import annotations

import pytest

from procedures.core.kernel.scan import DeleteFileEntry, FileScanTask
from procedures.errors import ValidationError
from procedures.core.data_rewrite.grouping import expected_output_files, input_split_size, pack, plan_groups, plan_rewrite
from procedures.core.data_rewrite.options import (
    BIN_PACK, SORT, Z_ORDER, RewriteOptions, parse_position_delete_options, parse_rewrite_options,
)
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat

MB = 1024 * 1024


# ------------------------------------------------------------------------------ options
def test_defaults_follow_java():
    o = parse_rewrite_options({})
    assert (o.target_file_size, o.min_file_size, o.max_file_size) == (512 * MB, int(512 * MB * 0.75), int(512 * MB * 1.8))
    assert o.min_input_files == 5 and o.max_group_size == 100 * 1024**3 and o.max_concurrent == 5
    assert o.max_commits == 10 and o.max_failed_commits == 10 and o.delete_file_threshold == 2**31 - 1
    assert o.delete_ratio_threshold == 0.3 and o.use_starting_sequence_number and not o.partial_progress
    assert o.job_order == "none" and o.max_files_to_rewrite is None


def test_target_from_table_property_and_derived_bounds():
    o = parse_rewrite_options({}, table_properties={"write.target-file-size-bytes": "1000"})
    assert (o.target_file_size, o.min_file_size, o.max_file_size, o.write_max_file_size) == (1000, 750, 1800, 1400)
    assert parse_rewrite_options({"partial-progress.max-commits": "3"}).max_failed_commits == 3


def test_unknown_options_named_with_rewriter():
    with pytest.raises(ValidationError, match=r"Cannot use options \[bogus, compression-factor\].*rewriter BIN-PACK"):
        parse_rewrite_options({"bogus": "1", "compression-factor": "2"})
    # the shuffling options are valid for sort and z-order, the z-order ones only for z-order
    assert parse_rewrite_options({"compression-factor": "2"}, rewriter=SORT).compression_factor == 2.0
    with pytest.raises(ValidationError, match=r"\[var-length-contribution\].*rewriter SORT"):
        parse_rewrite_options({"var-length-contribution": "4"}, rewriter=SORT)
    assert parse_rewrite_options({"var-length-contribution": "4"}, rewriter=Z_ORDER).var_length_contribution == 4


@pytest.mark.parametrize("options, message", [
    ({"target-file-size-bytes": "0"}, "'target-file-size-bytes' is set to 0 but must be > 0"),
    ({"target-file-size-bytes": "abc"}, "Option 'target-file-size-bytes' must be an integer, got 'abc'"),
    ({"min-file-size-bytes": "-1"}, "'min-file-size-bytes' is set to -1 but must be >= 0"),
    ({"target-file-size-bytes": "100", "min-file-size-bytes": "100"},
     "'target-file-size-bytes' (100) must be > 'min-file-size-bytes' (100)"),
    ({"target-file-size-bytes": "100", "max-file-size-bytes": "100"},
     "'target-file-size-bytes' (100) must be < 'max-file-size-bytes' (100)"),
    ({"min-input-files": "0"}, "'min-input-files' is set to 0 but must be > 0"),
    ({"min-input-files": "99999999999"}, "'min-input-files' is set to 99999999999 but must fit in a 32-bit integer"),
    ({"rewrite-all": "yes"}, "Option 'rewrite-all' must be true or false, got 'yes'"),
    ({"max-file-group-size-bytes": "0"}, "'max-file-group-size-bytes' is set to 0 but must be > 0"),
    ({"partial-progress.enabled": "true", "partial-progress.max-commits": "0"},
     "Cannot set partial-progress.max-commits to 0, the value must be positive when partial-progress.enabled is true"),
    ({"partial-progress.max-failed-commits": "x"}, "Option 'partial-progress.max-failed-commits' must be an integer"),
    ({"max-concurrent-file-group-rewrites": "0"},
     "Cannot set max-concurrent-file-group-rewrites to 0, the value must be positive."),
    ({"delete-file-threshold": "-1"}, "'delete-file-threshold' is set to -1 but must be >= 0"),
    ({"delete-ratio-threshold": "0"}, "'delete-ratio-threshold' is set to 0.0 but must be > 0"),
    ({"delete-ratio-threshold": "1.5"}, "'delete-ratio-threshold' is set to 1.5 but must be <= 1"),
    ({"delete-ratio-threshold": "lots"}, "Option 'delete-ratio-threshold' must be a number, got 'lots'"),
    ({"use-starting-sequence-number": "1"}, "Option 'use-starting-sequence-number' must be true or false"),
    ({"remove-dangling-deletes": "maybe"}, "Option 'remove-dangling-deletes' must be true or false"),
    ({"output-spec-id": "7"},
     "Cannot use output spec id 7 because the table does not contain a reference to this spec-id."),
    ({"rewrite-job-order": "random"}, "Invalid rewrite job order name: random"),
    ({"max-files-to-rewrite": "0"}, "Cannot set max-files-to-rewrite to 0, the value must be positive integer."),
])
def test_bad_values_name_the_option(options, message):
    with pytest.raises(ValidationError) as e:
        parse_rewrite_options(options, spec_ids=(0, 1))
    assert message in str(e.value)


@pytest.mark.parametrize("rewriter, options, message", [
    (SORT, {"compression-factor": "0"}, "'compression-factor' is set to 0.0 but must be > 0"),
    (SORT, {"shuffle-partitions-per-file": "0"}, "'shuffle-partitions-per-file' is set to 0 but must be > 0"),
    (Z_ORDER, {"var-length-contribution": "0"}, "Cannot use less than 1 byte for variable length types with ZOrder"),
    (Z_ORDER, {"max-output-size": "0"}, "Cannot have the interleaved ZOrder value use less than 1 byte"),
])
def test_shuffling_option_errors(rewriter, options, message):
    with pytest.raises(ValidationError, match=message):
        parse_rewrite_options(options, rewriter=rewriter)


def test_job_order_case_insensitive_and_output_spec():
    o = parse_rewrite_options({"rewrite-job-order": "BYTES-DESC", "output-spec-id": "1"}, spec_ids=(0, 1))
    assert o.job_order == "bytes-desc" and o.output_spec_id == 1


def test_position_delete_options():
    o = parse_position_delete_options({}, table_properties={})
    assert o.target_file_size == 64 * MB and o.min_file_size == int(64 * MB * 0.75)
    with pytest.raises(ValidationError, match=r"Cannot use options \[max-files-to-rewrite\]"):
        parse_position_delete_options({"max-files-to-rewrite": "3"})
    with pytest.raises(ValidationError, match=r"\[delete-file-threshold\]"):
        parse_position_delete_options({"delete-file-threshold": "3"})


# ------------------------------------------------------------------------------ sizing
def _opts(**kw) -> RewriteOptions:
    options = {"target-file-size-bytes": "1000"}
    options.update({k.replace("_", "-"): str(v) for k, v in kw.items()})
    return parse_rewrite_options(options)


def test_expected_output_files_rounding():
    o = _opts()  # target 1000, min 750, max 1800, writer max 1400
    assert expected_output_files(999, o) == 1
    assert expected_output_files(10_100, o) == 10      # remainder 100 spread: avg 1010 < 1100
    assert expected_output_files(10_800, o) == 11      # remainder 800 > min 750 stays a file
    assert expected_output_files(1_500, o) == 2        # remainder 500 spread would give 1500 > 1100
    assert expected_output_files(10_100, o, compression_factor=2.0) == 20
    assert input_split_size(10_100, o) == 1400         # 1010 + 5 KiB overhead, clamped to the writer max
    assert input_split_size(500, parse_rewrite_options({})) == 512 * MB  # never below the target
    assert input_split_size(100_000, _opts(max_file_size_bytes=100_000)) == 1000 + 5120  # per-file share + overhead


def test_pack_is_sequential_with_lookback_one():
    assert pack("abcde", [4, 4, 4, 9, 1], 8) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert pack("ab", [20, 1], 8) == [["a"], ["b"]]


# ------------------------------------------------------------------------------ grouping
def _task(i: int, size: int, partition=(0,), spec_id=0, records=100, deletes=()) -> FileScanTask:
    f = DataFile(f"s3://b/t/data/f{i}.parquet", FileFormat.PARQUET, partition, records, size, spec_id=spec_id)
    return FileScanTask(f, 1, tuple(deletes), ALWAYS_TRUE, spec_id, partition, None)


def _dv(i: int, target: FileScanTask, deleted: int) -> DeleteFileEntry:
    f = DataFile(f"s3://b/t/data/dv{i}.puffin", FileFormat.PUFFIN, target.partition, deleted, 500,
                 content=FileContent.POSITION_DELETES, referenced_data_file=target.file_path,
                 content_offset=4, content_size_in_bytes=40)
    return DeleteFileEntry(f, 2)


def _plan(tasks, o):
    from procedures.core.data_rewrite.grouping import _too_high_delete_ratio, _too_many_deletes

    return plan_groups(
        tasks, o, bucket_of=lambda t: t.data_file.partition if t.data_file.spec_id == 0 else (None,),
        file_filter=lambda t: _too_many_deletes(t, o) or _too_high_delete_ratio(t, o),
        group_filter=lambda g: any(_too_many_deletes(t, o) or _too_high_delete_ratio(t, o) for t in g),
        max_files_to_rewrite=o.max_files_to_rewrite,
    )


def test_small_files_grouped_per_partition_and_min_input_files():
    tasks = [_task(i, 100, partition=(i % 2,)) for i in range(10)]  # 5 small files in each of 2 partitions
    plan = _plan(tasks, _opts())
    assert plan.total_group_count == 2
    assert [sorted(t.data_file.partition[0] for t in g.tasks) for g in plan.groups] == [[0] * 5, [1] * 5]
    assert [(g.global_index, g.partition_index) for g in plan.groups] == [(1, 1), (2, 1)]
    # four files per partition: fewer than min-input-files and only 400 bytes -> nothing to do
    assert _plan(tasks[:8], _opts()).groups == ()
    assert len(_plan(tasks[:8], _opts(min_input_files=4)).groups) == 2
    assert len(_plan(tasks[:8], _opts(rewrite_all="true")).groups) == 2


def test_well_sized_files_are_not_candidates_and_big_ones_are_split():
    tasks = [_task(0, 1000), _task(1, 900), _task(2, 5000)]  # in range, in range, > max 1800
    plan = _plan(tasks, _opts())
    assert [[t.data_file.file_path[-8:] for t in g.tasks] for g in plan.groups] == [["f2.parquet"[-8:]]]
    assert plan.groups[0].expected_output_files == 5


def test_enough_content_group_and_group_size_limit():
    tasks = [_task(i, 600) for i in range(3)]  # 3 small files, 1800 bytes > target
    plan = _plan(tasks, _opts())
    assert len(plan.groups) == 1 and plan.groups[0].input_file_count == 3
    plan = _plan([_task(i, 100) for i in range(12)], _opts(max_file_group_size_bytes=500))
    assert [g.input_file_count for g in plan.groups] == [5, 5]  # the last bin of 2 fails min-input-files


def test_delete_thresholds_force_single_files():
    base = _task(0, 1000, records=10)
    with_dv = _task(0, 1000, records=10, deletes=[_dv(0, base, 3)])
    plan = _plan([with_dv, _task(1, 1000)], _opts())
    assert [g.input_file_count for g in plan.groups] == [1]
    assert plan.groups[0].dangling_dvs()[0].file_path.endswith("dv0.puffin")
    low = _task(0, 1000, records=10, deletes=[_dv(0, base, 2)])
    assert _plan([low], _opts()).groups == ()
    assert len(_plan([low], _opts(delete_file_threshold=1)).groups) == 1
    assert len(_plan([low], _opts(delete_ratio_threshold=0.2)).groups) == 1


def test_other_spec_files_share_one_bucket_and_job_order_and_max_files():
    tasks = [_task(i, 100, partition=(), spec_id=1) for i in range(5)] + [_task(10 + i, 50) for i in range(6)]
    plan = _plan(tasks, _opts(rewrite_job_order="files-desc"))
    assert [g.input_file_count for g in plan.groups] == [6, 5]
    assert plan.groups[1].partition == (None,)
    plan = _plan(tasks, _opts(rewrite_job_order="bytes-desc"))
    assert [g.input_size for g in plan.groups] == [500, 300]
    plan = _plan(tasks, _opts(max_files_to_rewrite=7))
    assert [g.input_file_count for g in plan.groups] == [5, 2] and plan.total_group_count == 2


def test_plan_rewrite_on_empty_table():
    from procedures.core.kernel.builder import new_table_metadata
    from procedures.spec.schema import Schema
    from procedures.spec.types import LONG, NestedField

    md, _ = new_table_metadata(schema=Schema((NestedField(1, "id", LONG, True),)), location="/tmp/x")
    assert plan_rewrite(md, None, parse_rewrite_options({})).groups == ()


def test_rewriter_names():
    assert (BIN_PACK, SORT, Z_ORDER) == ("BIN-PACK", "SORT", "Z-ORDER")


# ------------------------------------------------------------------------------ z-order values
def test_ordered_bytes_preserve_order():
    import numpy as np
    import pyarrow as pa

    from procedures.core.data_rewrite.zorder import ordered_bytes

    def keys(arr):
        return [bytes(r) for r in ordered_bytes(arr)]

    ints = [-(2**63), -5, -1, 0, 1, 7, 2**63 - 1]
    assert keys(pa.array(ints, pa.int64())) == sorted(keys(pa.array(ints, pa.int64())))
    assert bytes(ordered_bytes(pa.array([0], pa.int32()))[0]) == bytes([0x80, 0, 0, 0, 0, 0, 0, 0])
    floats = [float("-inf"), -2.5, -0.0, 0.0, 1e-300, 3.0, float("inf")]
    k = keys(pa.array(floats, pa.float64()))
    assert k == sorted(k) and len(set(k)) == len(k)
    strs = pa.array(["", "a", "ab", "b", None])
    k = [bytes(r) for r in ordered_bytes(strs, 2)]
    assert k[:4] == sorted(k[:4]) and k[4] == b"\x00\x00" and k[2] == b"ab"
    assert ordered_bytes(pa.array([None, 3], pa.int64()))[0].tolist() == [0] * 8
    assert np.asarray(ordered_bytes(pa.array([True, False]))).tolist()[0][0] == 1
    with pytest.raises(ValidationError, match="Z-order"):
        ordered_bytes(pa.array([[1]]))


def test_interleave_vector():
    import numpy as np
    import pyarrow as pa

    from procedures.core.data_rewrite.zorder import interleave_bits, zorder_values

    a = np.array([[0xFF], [0x00], [0x80]], dtype=np.uint8)
    b = np.array([[0x00], [0xFF], [0x80]], dtype=np.uint8)
    out = interleave_bits([a, b])
    assert out.tolist() == [[0xAA, 0xAA], [0x55, 0x55], [0xC0, 0x00]]
    assert interleave_bits([a, b], max_output_size=1).tolist() == [[0xAA], [0x55], [0xC0]]
    # columns of different widths: the narrow one is skipped once exhausted
    wide = np.array([[0xFF, 0xFF]], dtype=np.uint8)
    assert interleave_bits([np.array([[0x00]], dtype=np.uint8), wide]).tolist() == [[0x55, 0x55, 0xFF]]
    t = pa.table({"x": pa.array([0, 1, 2, 3], pa.int64()), "y": pa.array([0, 0, 1, 1], pa.int64())})
    z = zorder_values(t, ["x", "y"])
    assert len(z[0].as_py()) == 16
    assert sorted(range(4), key=lambda i: z[i].as_py()) == [0, 1, 2, 3]
