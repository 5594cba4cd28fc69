"""Options of ``rewrite_data_files`` and ``rewrite_position_delete_files`` (procedures.md §3.9,
§3.17): the ``options`` map parsed into typed settings, validated exactly once, when a plan is made.

Options are validated exactly like Iceberg Java 1.10: unknown keys first (one error naming all of
them and the rewriter), then each value, with Java's messages.  Booleans must be ``true`` or
``false`` (Java silently reads anything else as false; we refuse it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from procedures.core.kernel.properties import DELETE_TARGET_FILE_SIZE_BYTES, WRITE_TARGET_FILE_SIZE_BYTES
from procedures.errors import IcebergError, ValidationError
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import Expression, bind
from procedures.spec.metadata import TableMetadata

__all__ = [
    "BIN_PACK", "SORT", "Z_ORDER", "SizeOptions", "RewriteOptions", "PositionDeleteRewriteOptions",
    "parse_rewrite_options", "parse_position_delete_options", "valid_options", "write_max_file_size", "parse_where",
]

BIN_PACK, SORT, Z_ORDER = "BIN-PACK", "SORT", "Z-ORDER"

# option names (Java's RewriteDataFiles / SizeBasedFileRewritePlanner constants)
TARGET = "target-file-size-bytes"
MIN_SIZE = "min-file-size-bytes"
MAX_SIZE = "max-file-size-bytes"
MIN_INPUT_FILES = "min-input-files"
REWRITE_ALL = "rewrite-all"
MAX_GROUP_SIZE = "max-file-group-size-bytes"
PARTIAL_ENABLED = "partial-progress.enabled"
PARTIAL_MAX_COMMITS = "partial-progress.max-commits"
PARTIAL_MAX_FAILED = "partial-progress.max-failed-commits"
MAX_CONCURRENT = "max-concurrent-file-group-rewrites"
DELETE_FILE_THRESHOLD = "delete-file-threshold"
DELETE_RATIO_THRESHOLD = "delete-ratio-threshold"
USE_STARTING_SEQ = "use-starting-sequence-number"
REMOVE_DANGLING = "remove-dangling-deletes"
OUTPUT_SPEC_ID = "output-spec-id"
JOB_ORDER = "rewrite-job-order"
MAX_FILES_TO_REWRITE = "max-files-to-rewrite"
SHUFFLE_PARTITIONS = "shuffle-partitions-per-file"
COMPRESSION_FACTOR = "compression-factor"
VAR_LENGTH_CONTRIBUTION = "var-length-contribution"
MAX_OUTPUT_SIZE = "max-output-size"

_SIZE_PLANNER = {TARGET, MIN_SIZE, MAX_SIZE, MIN_INPUT_FILES, REWRITE_ALL, MAX_GROUP_SIZE}
_DATA_PLANNER = _SIZE_PLANNER | {DELETE_FILE_THRESHOLD, DELETE_RATIO_THRESHOLD, JOB_ORDER, MAX_FILES_TO_REWRITE}
_DATA_ACTION = {
    MAX_CONCURRENT, MAX_GROUP_SIZE, PARTIAL_ENABLED, PARTIAL_MAX_COMMITS, PARTIAL_MAX_FAILED, TARGET,
    USE_STARTING_SEQ, JOB_ORDER, OUTPUT_SPEC_ID, REMOVE_DANGLING, MAX_FILES_TO_REWRITE,
}
_SHUFFLING = {SHUFFLE_PARTITIONS, COMPRESSION_FACTOR}
_ZORDER = {VAR_LENGTH_CONTRIBUTION, MAX_OUTPUT_SIZE}
_POS_DELETE_ACTION = {MAX_CONCURRENT, PARTIAL_ENABLED, PARTIAL_MAX_COMMITS, JOB_ORDER}

JOB_ORDERS = ("bytes-asc", "bytes-desc", "files-asc", "files-desc", "none")

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
MAX_GROUP_SIZE_DEFAULT = 100 * 1024**3


def valid_options(rewriter: str) -> frozenset[str]:
    """Every option ``rewrite_data_files`` accepts with the given rewriter (BIN-PACK, SORT, Z-ORDER)."""
    names = set(_DATA_ACTION | _DATA_PLANNER)
    if rewriter in (SORT, Z_ORDER):
        names |= _SHUFFLING
    if rewriter == Z_ORDER:
        names |= _ZORDER
    return frozenset(names)


# ------------------------------------------------------------------------------ value parsing
_INT_RE = re.compile(r"[+-]?\d+")


def _check_unknown(options: Mapping[str, str], valid: set[str] | frozenset[str], rewriter: str) -> None:
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValidationError(
            f"Cannot use options [{', '.join(unknown)}], they are not supported by the action or the rewriter "
            f"{rewriter}; valid options: {', '.join(sorted(valid))}"
        )


def _long(options: Mapping[str, str], name: str, default: int, *, bits: int = 64) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw)
    if not _INT_RE.fullmatch(text):
        raise ValidationError(f"Option '{name}' must be an integer, got {text!r}")
    value = int(text)
    limit = 2 ** (bits - 1)
    if not -limit <= value < limit:
        raise ValidationError(f"Option '{name}' is set to {value} but must fit in a {bits}-bit integer")
    return value


def _int(options: Mapping[str, str], name: str, default: int) -> int:
    return _long(options, name, default, bits=32)


def _double(options: Mapping[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ValidationError(f"Option '{name}' must be a number, got {raw!r}") from None
    if math.isnan(value):
        raise ValidationError(f"Option '{name}' must be a number, got {raw!r}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ValidationError(f"Option '{name}' must be true or false, got {raw!r}")
    return text == "true"


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValidationError(message)


def _job_order(options: Mapping[str, str]) -> str:
    raw = options.get(JOB_ORDER, "none")
    text = str(raw).lower()
    if text not in JOB_ORDERS:
        raise ValidationError(f"Invalid rewrite job order name: {raw} (use one of {', '.join(JOB_ORDERS)})")
    return text


# ------------------------------------------------------------------------------ options
@dataclass(frozen=True, slots=True)
class SizeOptions:
    """The size-based planner's settings, shared by data and position delete rewrites."""

    target_file_size: int
    min_file_size: int
    max_file_size: int
    min_input_files: int = 5
    rewrite_all: bool = False
    max_group_size: int = MAX_GROUP_SIZE_DEFAULT
    job_order: str = "none"
    max_concurrent: int = 5
    partial_progress: bool = False
    max_commits: int = 10

    @property
    def write_max_file_size(self) -> int:
        """The writer's target: target plus half the distance to max (avoids tiny remainder files)."""
        return write_max_file_size(self.target_file_size, self.max_file_size)


@dataclass(frozen=True, slots=True)
class RewriteOptions(SizeOptions):
    """Every ``rewrite_data_files`` option, parsed and validated, with Java 1.10's defaults (the
    rewriter itself is not an option: :class:`procedures.core.data_rewrite.rewriter.Rewriter`)."""

    delete_file_threshold: int = INT_MAX
    delete_ratio_threshold: float = 0.3
    max_files_to_rewrite: int | None = None
    output_spec_id: int = 0
    max_failed_commits: int = 10
    use_starting_sequence_number: bool = True
    remove_dangling_deletes: bool = False
    shuffle_partitions_per_file: int = 1
    compression_factor: float = 1.0
    var_length_contribution: int = 8
    max_output_size: int = INT_MAX


@dataclass(frozen=True, slots=True)
class PositionDeleteRewriteOptions(SizeOptions):
    """Every ``rewrite_position_delete_files`` option, parsed and validated."""


def _size_options(options: Mapping[str, str], default_target: int) -> dict[str, Any]:
    target = _long(options, TARGET, default_target)
    min_size = _long(options, MIN_SIZE, int(target * 0.75))
    max_size = _long(options, MAX_SIZE, int(target * 1.80))
    _check(target > 0, f"'{TARGET}' is set to {target} but must be > 0")
    _check(min_size >= 0, f"'{MIN_SIZE}' is set to {min_size} but must be >= 0")
    _check(target > min_size, f"'{TARGET}' ({target}) must be > '{MIN_SIZE}' ({min_size}), all new files will be "
                              "smaller than the min threshold")
    _check(target < max_size, f"'{TARGET}' ({target}) must be < '{MAX_SIZE}' ({max_size}), all new files will be "
                              "larger than the max threshold")
    min_input = _int(options, MIN_INPUT_FILES, 5)
    _check(min_input > 0, f"'{MIN_INPUT_FILES}' is set to {min_input} but must be > 0")
    rewrite_all = _bool(options, REWRITE_ALL, False)
    max_group = _long(options, MAX_GROUP_SIZE, MAX_GROUP_SIZE_DEFAULT)
    _check(max_group > 0, f"'{MAX_GROUP_SIZE}' is set to {max_group} but must be > 0")
    return dict(target_file_size=target, min_file_size=min_size, max_file_size=max_size,
                min_input_files=min_input, rewrite_all=rewrite_all, max_group_size=max_group)


def _action_options(options: Mapping[str, str]) -> dict[str, Any]:
    max_concurrent = _int(options, MAX_CONCURRENT, 5)
    max_commits = _int(options, PARTIAL_MAX_COMMITS, 10)
    partial = _bool(options, PARTIAL_ENABLED, False)
    _check(max_concurrent >= 1, f"Cannot set {MAX_CONCURRENT} to {max_concurrent}, the value must be positive.")
    _check(not partial or max_commits > 0,
           f"Cannot set {PARTIAL_MAX_COMMITS} to {max_commits}, the value must be positive when {PARTIAL_ENABLED} is true")
    return dict(max_concurrent=max_concurrent, max_commits=max_commits, partial_progress=partial)


def parse_rewrite_options(
    options: Mapping[str, str] | None,
    *,
    rewriter: str = BIN_PACK,
    table_properties: Mapping[str, str] | None = None,
    spec_ids: Iterable[int] = (0,),
    current_spec_id: int = 0,
) -> RewriteOptions:
    """Validate ``rewrite_data_files`` options for ``rewriter`` the way Java 1.10 does.

    The default target comes from the table property ``write.target-file-size-bytes``.  Raises
    ValidationError naming the offending option (or all unknown ones) and its value.
    """
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    _check_unknown(opts, valid_options(rewriter), rewriter)
    props = table_properties or {}
    default_target = WRITE_TARGET_FILE_SIZE_BYTES.read(props)
    size = _size_options(opts, default_target)
    spec_id = _int(opts, OUTPUT_SPEC_ID, current_spec_id)
    _check(spec_id in set(spec_ids),
           f"Cannot use output spec id {spec_id} because the table does not contain a reference to this spec-id.")
    threshold = _int(opts, DELETE_FILE_THRESHOLD, INT_MAX)
    _check(threshold >= 0, f"'{DELETE_FILE_THRESHOLD}' is set to {threshold} but must be >= 0")
    ratio = _double(opts, DELETE_RATIO_THRESHOLD, 0.3)
    _check(ratio > 0, f"'{DELETE_RATIO_THRESHOLD}' is set to {ratio} but must be > 0")
    _check(ratio <= 1, f"'{DELETE_RATIO_THRESHOLD}' is set to {ratio} but must be <= 1")
    job_order = _job_order(opts)
    max_files = _int(opts, MAX_FILES_TO_REWRITE, 0) if MAX_FILES_TO_REWRITE in opts else None
    _check(max_files is None or max_files > 0,
           f"Cannot set {MAX_FILES_TO_REWRITE} to {max_files}, the value must be positive integer.")
    extra: dict[str, Any] = {}
    if rewriter in (SORT, Z_ORDER):
        cf = _double(opts, COMPRESSION_FACTOR, 1.0)
        _check(cf > 0, f"'{COMPRESSION_FACTOR}' is set to {cf} but must be > 0")
        spf = _int(opts, SHUFFLE_PARTITIONS, 1)
        _check(spf > 0, f"'{SHUFFLE_PARTITIONS}' is set to {spf} but must be > 0")
        extra.update(compression_factor=cf, shuffle_partitions_per_file=spf)
    if rewriter == Z_ORDER:
        vlc = _int(opts, VAR_LENGTH_CONTRIBUTION, 8)
        _check(vlc > 0, f"Cannot use less than 1 byte for variable length types with ZOrder, "
                        f"'{VAR_LENGTH_CONTRIBUTION}' was set to {vlc}")
        mos = _int(opts, MAX_OUTPUT_SIZE, INT_MAX)
        _check(mos > 0, f"Cannot have the interleaved ZOrder value use less than 1 byte, '{MAX_OUTPUT_SIZE}' was set to {mos}")
        extra.update(var_length_contribution=vlc, max_output_size=mos)
    action = _action_options(opts)
    max_failed = _int(opts, PARTIAL_MAX_FAILED, action["max_commits"])
    return RewriteOptions(
        **size, **action, **extra, job_order=job_order, output_spec_id=spec_id,
        delete_file_threshold=threshold, delete_ratio_threshold=ratio, max_files_to_rewrite=max_files,
        max_failed_commits=max_failed,
        use_starting_sequence_number=_bool(opts, USE_STARTING_SEQ, True),
        remove_dangling_deletes=_bool(opts, REMOVE_DANGLING, False),
    )


def parse_position_delete_options(
    options: Mapping[str, str] | None, *, table_properties: Mapping[str, str] | None = None,
) -> PositionDeleteRewriteOptions:
    """Validate ``rewrite_position_delete_files`` options (Java 1.10's valid set; the default target is
    the table property ``write.delete.target-file-size-bytes``)."""
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    _check_unknown(opts, _POS_DELETE_ACTION | _SIZE_PLANNER | {JOB_ORDER}, BIN_PACK)
    props = table_properties or {}
    default_target = DELETE_TARGET_FILE_SIZE_BYTES.read(props)
    size = _size_options(opts, default_target)
    job_order = _job_order(opts)
    return PositionDeleteRewriteOptions(**size, **_action_options(opts), job_order=job_order)


def write_max_file_size(target: int, max_size: int) -> int:
    """Target plus half the way to the max: the size writers roll files at."""
    return int(target + (max_size - target) * 0.5)


def parse_where(md: TableMetadata, where: str | None, case_sensitive: bool) -> Expression | None:
    """The ``where`` argument as an Iceberg filter bound to the table schema (None for no filter)."""
    if where is None:
        return None
    try:
        expr = parse_filter(where)
        bind(expr, md.schema().as_struct(), case_sensitive)
    except IcebergError as e:
        raise ValidationError(f"Cannot parse predicates in where option: {where} ({e})") from e
    return expr
