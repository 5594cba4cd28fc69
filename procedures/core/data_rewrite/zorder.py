"""Z-order values for ``rewrite_data_files(sort_order => 'zorder(a, b)')``, pure pyarrow/numpy.

Each column is mapped to bytes whose unsigned lexicographic order is the column's order (Iceberg
Java's ``ZOrderByteUtils`` idea): integers, dates and timestamps as 8 big-endian bytes with the
sign bit flipped; floats by their IEEE bits, flipped so negatives sort first; booleans as one byte
padded to 8; strings and binary as their first ``var_length_contribution`` bytes, zero padded.
Nulls become all zero bytes (they sort first).  The columns' bits are then interleaved, most
significant first, one bit of each column in turn (a column that ran out of bits is skipped), and
the result is cut at ``max_output_size`` bytes.  Sorting rows by this value clusters them in
every column at once, so range predicates on any of the columns skip more files.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from procedures.errors import ValidationError

__all__ = ["ordered_bytes", "interleave_bits", "zorder_values", "Z_COLUMN", "PRIMITIVE_BUFFER_SIZE"]

Z_COLUMN = "ICEZVALUE"
PRIMITIVE_BUFFER_SIZE = 8
_SIGN = np.uint64(1 << 63)


def _u64_to_bytes(values: np.ndarray) -> np.ndarray:
    return values.astype(">u8").view(np.uint8).reshape(-1, 8)


def ordered_bytes(array: pa.Array | pa.ChunkedArray, var_length: int = PRIMITIVE_BUFFER_SIZE) -> np.ndarray:
    """An ``(n, width)`` uint8 matrix whose rows compare (unsigned, lexicographically) as the values do."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = array.type
    n = len(array)
    valid = ~np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t):
        storage = array.cast(pa.int64()) if not pa.types.is_timestamp(t) else array.view(pa.int64())
        raw = np.asarray(storage.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        out = _u64_to_bytes(raw.view(np.uint64) ^ _SIGN)
    elif pa.types.is_floating(t):
        raw = np.asarray(array.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        bits = raw.view(np.uint64)
        negative = (bits & _SIGN) != 0
        # negatives: flip every bit (reverses their order, puts them first); positives: flip the sign
        out = _u64_to_bytes(np.where(negative, ~bits, bits | _SIGN))
    elif pa.types.is_boolean(t):
        raw = np.asarray(array.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.uint8)
        out = np.zeros((n, PRIMITIVE_BUFFER_SIZE), dtype=np.uint8)
        out[:, 0] = raw
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        values = array.cast(pa.binary()) if not pa.types.is_binary(t) else array
        out = np.zeros((n, var_length), dtype=np.uint8)
        for i, v in enumerate(values.to_pylist()):
            if v:
                chunk = v[:var_length]
                out[i, : len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
    else:
        raise ValidationError(
            f"Cannot use a column of type {t} in a Z-order: supported are integers, floats, booleans, "
            "dates, timestamps, strings and binary"
        )
    if not valid.all():
        out = out.copy()
        out[~valid] = 0
    return out


def interleave_bits(columns: Sequence[np.ndarray], max_output_size: int | None = None) -> np.ndarray:
    """Interleave the bits of per-column byte matrices (most significant first, round robin)."""
    if not columns:
        raise ValidationError("Cannot compute a Z-order value of no columns")
    n = columns[0].shape[0]
    bits = [np.unpackbits(c, axis=1) for c in columns]
    widths = [b.shape[1] for b in bits]
    order: list[int] = []
    offsets = np.cumsum([0] + widths[:-1])
    for i in range(max(widths)):
        for c, w in enumerate(widths):
            if i < w:
                order.append(int(offsets[c]) + i)
    total = np.concatenate(bits, axis=1)[:, order] if n else np.zeros((0, len(order)), dtype=np.uint8)
    packed = np.packbits(total, axis=1)
    if max_output_size is not None and packed.shape[1] > max_output_size:
        packed = packed[:, :max_output_size]
    return packed


def zorder_values(
    table: pa.Table | pa.RecordBatch,
    columns: Sequence[str],
    *,
    var_length_contribution: int = PRIMITIVE_BUFFER_SIZE,
    max_output_size: int | None = None,
) -> pa.Array:
    """The Z-order value of every row of ``table`` over ``columns``, as a binary array."""
    mats = [ordered_bytes(table.column(c), var_length_contribution) for c in columns]
    packed = interleave_bits(mats, max_output_size)
    width = packed.shape[1]
    flat = packed.tobytes()
    return pa.array([flat[i * width:(i + 1) * width] for i in range(packed.shape[0])], pa.binary())
