"""Transforms against the spec's hash and transform vectors (spec-onfile §6, §7)."""

import datetime
import struct
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from procedures.errors import ValidationError
from procedures.spec.transforms import (
    DAY, HOUR, IDENTITY, MONTH, VOID, YEAR, BucketTransform, TruncateTransform, UnknownTransform,
    murmur3_hash, parse_transform,
)
from procedures.spec.types import (
    BINARY, BOOLEAN, DATE, DOUBLE, FLOAT, INT, LONG, STRING, TIME, TIMESTAMP, TIMESTAMP_NS, TIMESTAMPTZ,
    TIMESTAMPTZ_NS, UUID, DecimalType, FixedType, StructType,
)

TS = 1510871468000000  # 2017-11-16T22:31:08

HASH_VECTORS = [
    (34, INT, 2017239379),
    (34, LONG, 2017239379),
    (Decimal("14.20"), DecimalType(9, 2), -500754589),
    (17486, DATE, -653330422),
    (81068000000, TIME, -662762989),
    (TS, TIMESTAMP, -2047944441),
    (TS + 1, TIMESTAMP, -1207196810),
    (TS, TIMESTAMPTZ, -2047944441),  # 2017-11-16T14:31:08-08:00 is this UTC instant
    (TS * 1000 + 1001, TIMESTAMP_NS, -1207196810),
    (TS * 1000 + 1001, TIMESTAMPTZ_NS, -1207196810),
    ("iceberg", STRING, 1210000089),
    ("34", STRING, -427558391),
    (uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), UUID, 1488055340),
    (uuid.UUID("f79c3e09-677c-4f6a-8a3c-b0c84e3c8a8f"), UUID, -405710383),
    (b"\x00\x01\x02\x03", FixedType(4), -188683207),
    (b"\x00\x01\x02\x03", BINARY, -188683207),
    (True, BOOLEAN, 1392991556),
    (1.0, FLOAT, -142385009),
    (1.0, DOUBLE, -142385009),
    (0.0, DOUBLE, 1669671676),
    (-0.0, DOUBLE, 1669671676),
]


@pytest.mark.parametrize("value,type_,expected", HASH_VECTORS)
def test_murmur3_hash_vectors(value, type_, expected):
    assert murmur3_hash(value, type_) == expected


def test_bucket16_vectors():
    b = BucketTransform(16)
    assert b.apply(34, INT) == 3
    assert b.apply("iceberg", STRING) == 9
    assert b.apply(-1, TIMESTAMP) == 8
    assert b.apply(-1, TIMESTAMP_NS) == 8
    assert b.apply(None, INT) is None
    assert b.result_type(STRING) == INT


TRUNCATE_VECTORS = [
    (10, 1, INT, 0),
    (10, -1, INT, -10),
    (10, -11, LONG, -20),
    (10, 10, LONG, 10),
    (10, -(2**31), INT, 2**31 - 2),  # wraps like Java's int arithmetic
    (50, Decimal("10.65"), DecimalType(9, 2), Decimal("10.50")),
    (50, Decimal("-0.05"), DecimalType(9, 2), Decimal("-0.50")),
    (3, "iceberg", STRING, "ice"),
    (2, "😀ab", STRING, "😀a"),
    (3, b"\x01\x02\x03\x04\x05", BINARY, b"\x01\x02\x03"),
]


@pytest.mark.parametrize("width,value,type_,expected", TRUNCATE_VECTORS)
def test_truncate_vectors(width, value, type_, expected):
    got = TruncateTransform(width).apply(value, type_)
    assert got == expected
    if isinstance(expected, Decimal):
        assert str(got) == str(expected)  # the scale is kept


US = 1_000_000
TIME_TABLE = [
    # micros, year, month, day, hour
    (TS, 47, 574, 17486, 419686),
    (0, 0, 0, 0, 0),
    (-1, -1, -1, -1, -1),
    (-86400 * US, -1, -1, -1, -24),
    (-(366 * 86400 * US) - 1, -2, -13, -367, -8785),  # 1968-12-30T23:59:59.999999
    (-(365 * 86400 * US) - 1, -2, -13, -366, -8761),  # 1968-12-31T23:59:59.999999
]


@pytest.mark.parametrize("micros,year,month,day,hour", TIME_TABLE)
def test_time_transforms_floor(micros, year, month, day, hour):
    for t in (TIMESTAMP, TIMESTAMPTZ):
        assert (YEAR.apply(micros, t), MONTH.apply(micros, t), DAY.apply(micros, t), HOUR.apply(micros, t)) == (
            year, month, day, hour,
        )
    ns = micros * 1000 + 999  # sub-micro nanos floor into the same micro
    assert (YEAR.apply(ns, TIMESTAMP_NS), MONTH.apply(ns, TIMESTAMP_NS), DAY.apply(ns, TIMESTAMP_NS),
            HOUR.apply(ns, TIMESTAMP_NS)) == (year, month, day, hour)


def test_time_transforms_on_dates():
    assert (YEAR.apply(17486, DATE), MONTH.apply(17486, DATE), DAY.apply(17486, DATE)) == (47, 574, 17486)
    assert (YEAR.apply(-1, DATE), MONTH.apply(-1, DATE), DAY.apply(-1, DATE)) == (-1, -1, -1)
    assert not HOUR.can_transform(DATE)
    assert DAY.result_type(TIMESTAMP) == DATE and YEAR.result_type(DATE) == INT


def test_human_strings():
    assert YEAR.to_human_string(47, DATE) == "2017"
    assert YEAR.to_human_string(-1, DATE) == "1969"
    assert MONTH.to_human_string(574, TIMESTAMP) == "2017-11"
    assert MONTH.to_human_string(-13, TIMESTAMP) == "1968-12"
    assert DAY.to_human_string(17486, TIMESTAMP) == "2017-11-16"
    assert HOUR.to_human_string(419686, TIMESTAMP) == "2017-11-16-22"
    assert HOUR.to_human_string(-1, TIMESTAMP) == "1969-12-31-23"
    assert BucketTransform(16).to_human_string(9, STRING) == "9"
    assert TruncateTransform(3).to_human_string("a b", STRING) == "a b"
    assert IDENTITY.to_human_string(b"\xaa\xbb\xcc", BINARY) == "qrvM"
    assert VOID.to_human_string(None, INT) == "null"


def test_parse_transform_round_trips_and_is_case_insensitive():
    for text in ("identity", "bucket[16]", "truncate[3]", "year", "month", "day", "hour", "void"):
        assert str(parse_transform(text)) == text
    assert parse_transform("BUCKET[16]") == BucketTransform(16)
    assert parse_transform(" Truncate[ 3 ] ") == TruncateTransform(3)
    assert parse_transform("Day") is DAY
    unknown = parse_transform("zorder[3]")
    assert isinstance(unknown, UnknownTransform) and str(unknown) == "zorder[3]"
    with pytest.raises(ValidationError):
        unknown.apply(1, INT)
    with pytest.raises(ValidationError):
        parse_transform("bucket[0]")


def test_can_transform_and_order_rules():
    assert not BucketTransform(4).can_transform(BOOLEAN)
    assert not TruncateTransform(4).can_transform(FixedType(4))
    assert IDENTITY.satisfies_order_of(DAY) and not IDENTITY.satisfies_order_of(BucketTransform(4))
    assert HOUR.satisfies_order_of(DAY) and DAY.satisfies_order_of(YEAR) and not YEAR.satisfies_order_of(MONTH)
    assert TruncateTransform(10).satisfies_order_of(TruncateTransform(20), LONG)
    assert not TruncateTransform(10).satisfies_order_of(TruncateTransform(15), LONG)
    assert TruncateTransform(10).satisfies_order_of(TruncateTransform(5), STRING)
    assert not BucketTransform(16).preserves_order and TruncateTransform(2).preserves_order
    assert DAY.dedup_name == HOUR.dedup_name == "time"


# ---------------------------------------------------------------- apply_arrow agrees with apply

INTS = [34, -1, None, 0, -11, 2**31 - 1, -(2**31), 34]
TS_VALUES = [TS, -1, None, 0, -86400 * US, -(365 * 86400 * US) - 1, TS + 1]
DECIMALS = [Decimal("14.20"), Decimal("-0.05"), None, Decimal("10.65"), Decimal("-14.20")]
STRINGS = ["iceberg", "😀ab", None, "", "34", "a b"]
BINARIES = [b"\x00\x01\x02\x03", None, b"", b"\xff\xfe\xfd\xfc\xfb"]
UUIDS = [uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), None, uuid.UUID(int=0)]

ARROW_CASES = [
    (INT, pa.array(INTS, pa.int32()), INTS),
    (LONG, pa.array(INTS, pa.int64()), INTS),
    (DATE, pa.array([17486, -1, None, 0, -366], pa.int32()).cast(pa.date32()), [17486, -1, None, 0, -366]),
    (TIME, pa.array([81068000000, None, 0], pa.int64()).cast(pa.time64("us")), [81068000000, None, 0]),
    (TIMESTAMP, pa.array(TS_VALUES, pa.int64()).cast(pa.timestamp("us")), TS_VALUES),
    (TIMESTAMPTZ, pa.array(TS_VALUES, pa.int64()).cast(pa.timestamp("us", tz="UTC")), TS_VALUES),
    (TIMESTAMP_NS, pa.array([v if v is None else v * 1000 - 1 for v in TS_VALUES], pa.int64()).cast(pa.timestamp("ns")),
     [v if v is None else v * 1000 - 1 for v in TS_VALUES]),
    (DecimalType(9, 2), pa.array(DECIMALS, pa.decimal128(9, 2)), DECIMALS),
    (STRING, pa.array(STRINGS, pa.string()), STRINGS),
    (BINARY, pa.array(BINARIES, pa.binary()), BINARIES),
    (UUID, pa.array([u if u is None else u.bytes for u in UUIDS], pa.binary(16)), UUIDS),
    (FixedType(4), pa.array([b"\x00\x01\x02\x03", None], pa.binary(4)), [b"\x00\x01\x02\x03", None]),
]
TRANSFORMS = [IDENTITY, BucketTransform(16), BucketTransform(7), TruncateTransform(10), TruncateTransform(2),
              YEAR, MONTH, DAY, HOUR, VOID]


def _py(array, type_):
    """Arrow results in the package's Python representation."""
    if pa.types.is_date32(array.type):
        array = array.cast(pa.int32())
    elif pa.types.is_timestamp(array.type) or pa.types.is_time(array.type):
        array = array.cast(pa.int64())
    values = array.to_pylist()
    if type_ == UUID and array.type == pa.binary(16):
        values = [v if v is None else uuid.UUID(bytes=v) for v in values]
    return values


APPLICABLE = [(t, *case) for t in TRANSFORMS for case in ARROW_CASES if t.can_transform(case[0])]


@pytest.mark.parametrize("transform,type_,array,values", APPLICABLE, ids=[f"{c[0]}-{c[1]}" for c in APPLICABLE])
def test_apply_arrow_equals_apply(transform, type_, array, values):
    got = transform.apply_arrow(array, type_)
    assert len(got) == len(values)
    assert _py(got, type_) == [transform.apply(v, type_) for v in values]
    # chunked input gives the same answer
    chunked = pa.chunked_array([array.slice(0, 2), array.slice(2)])
    assert _py(transform.apply_arrow(chunked, type_), type_) == _py(got, type_)


def test_apply_arrow_result_types():
    ts = pa.array([TS, None], pa.int64()).cast(pa.timestamp("us"))
    assert DAY.apply_arrow(ts, TIMESTAMP).type == pa.date32()
    assert HOUR.apply_arrow(ts, TIMESTAMP).type == pa.int32()
    assert BucketTransform(4).apply_arrow(ts, TIMESTAMP).type == pa.int32()
    assert BucketTransform(16).apply_arrow(pa.array([34, None], pa.int32()), INT).to_pylist() == [3, None]


# ---------------------------------------------------------------- apply_arrow on the spec's literal vectors
# The expectations above come from ``apply``; these come from the spec.  bucket[2147483647] exposes a
# hash: (h & 0x7FFFFFFF) % 2147483647 is h & 0x7FFFFFFF for every h of these vectors.
MAX_INT = 2**31 - 1
PST = datetime.timezone(datetime.timedelta(hours=-8))
ARROW_HASH_VECTORS = [  # the spec's Appendix B ("32-bit Hash Requirements"), value written as the spec does
    (INT, pa.array([34], pa.int32()), 2017239379),
    (LONG, pa.array([34], pa.int64()), 2017239379),
    (DecimalType(9, 2), pa.array([Decimal("14.20")], pa.decimal128(9, 2)), -500754589),
    (DATE, pa.array([datetime.date(2017, 11, 16)], pa.date32()), -653330422),
    (TIME, pa.array([datetime.time(22, 31, 8)], pa.time64("us")), -662762989),
    (TIMESTAMP, pa.array([datetime.datetime(2017, 11, 16, 22, 31, 8)], pa.timestamp("us")), -2047944441),
    (TIMESTAMP, pa.array([datetime.datetime(2017, 11, 16, 22, 31, 8, 1)], pa.timestamp("us")), -1207196810),
    (TIMESTAMPTZ, pa.array([datetime.datetime(2017, 11, 16, 14, 31, 8, tzinfo=PST)], pa.timestamp("us", tz="UTC")),
     -2047944441),
    (TIMESTAMPTZ, pa.array([datetime.datetime(2017, 11, 16, 14, 31, 8, 1, tzinfo=PST)], pa.timestamp("us", tz="UTC")),
     -1207196810),
    (TIMESTAMP_NS, pa.array(["2017-11-16T22:31:08"], pa.string()).cast(pa.timestamp("ns")), -2047944441),
    (TIMESTAMP_NS, pa.array(["2017-11-16T22:31:08.000001001"], pa.string()).cast(pa.timestamp("ns")), -1207196810),
    (TIMESTAMPTZ_NS, pa.array(["2017-11-16T14:31:08.000001001-08:00"], pa.string()).cast(pa.timestamp("ns", tz="UTC")),
     -1207196810),
    (STRING, pa.array(["iceberg"], pa.string()), 1210000089),
    (UUID, pa.array([bytes.fromhex("F79C3E09677C4BBDA4793F349CB785E7")], pa.binary(16)), 1488055340),
    (FixedType(4), pa.array([bytes([0, 1, 2, 3])], pa.binary(4)), -188683207),
    (BINARY, pa.array([bytes([0, 1, 2, 3])], pa.binary()), -188683207),
]


@pytest.mark.parametrize("type_,array,spec_hash", ARROW_HASH_VECTORS,
                         ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(ARROW_HASH_VECTORS)])
def test_apply_arrow_bucket_on_spec_hash_vectors(type_, array, spec_hash):
    with_null = pa.concat_arrays([array, pa.nulls(1, array.type)])
    assert BucketTransform(MAX_INT).apply_arrow(with_null, type_).to_pylist() == [spec_hash & 0x7FFFFFFF, None]
    assert BucketTransform(16).apply_arrow(with_null, type_).to_pylist() == [(spec_hash & 0x7FFFFFFF) % 16, None]


def test_apply_arrow_bucket16_and_truncate_spec_examples():
    # bucket[16]: 34 -> 3, "iceberg" -> 9, timestamp -1 us and timestamp_ns -1 ns -> 8
    assert BucketTransform(16).apply_arrow(pa.array([34, 34], pa.int32()), INT).to_pylist() == [3, 3]
    assert BucketTransform(16).apply_arrow(pa.array(["iceberg"]), STRING).to_pylist() == [9]
    assert BucketTransform(16).apply_arrow(pa.array([-1], pa.int64()).cast(pa.timestamp("us")), TIMESTAMP).to_pylist() == [8]
    assert BucketTransform(16).apply_arrow(pa.array([-1], pa.int64()).cast(pa.timestamp("ns")), TIMESTAMP_NS).to_pylist() == [8]
    # truncate[W] (spec "Truncate Transform Details"): W=10 int/long 1 -> 0, -1 -> -10; decimal W=50
    # scale 2 10.65 -> 10.50; string W=3 iceberg -> ice; binary W=3 keeps 3 bytes
    for arrow_type, type_ in ((pa.int32(), INT), (pa.int64(), LONG)):
        got = TruncateTransform(10).apply_arrow(pa.array([1, -1, -11, 10, None], arrow_type), type_)
        assert got.type == arrow_type and got.to_pylist() == [0, -10, -20, 10, None]
    got = TruncateTransform(50).apply_arrow(pa.array([Decimal("10.65"), Decimal("-0.05")], pa.decimal128(9, 2)),
                                            DecimalType(9, 2))
    assert [str(v) for v in got.to_pylist()] == ["10.50", "-0.50"]
    assert TruncateTransform(3).apply_arrow(pa.array(["iceberg", "ic", None]), STRING).to_pylist() == ["ice", "ic", None]
    assert TruncateTransform(2).apply_arrow(pa.array(["😀ab"]), STRING).to_pylist() == ["😀a"]
    assert TruncateTransform(3).apply_arrow(pa.array([b"\x01\x02\x03\x04\x05"], pa.binary()), BINARY).to_pylist() == [
        b"\x01\x02\x03"]


@pytest.mark.parametrize("micros,year,month,day,hour", TIME_TABLE)
def test_apply_arrow_time_transforms_literal(micros, year, month, day, hour):
    # year/month/day/hour ordinals of the same literal table, through the Arrow path
    for arrow_type, type_, scale in ((pa.timestamp("us"), TIMESTAMP, 1), (pa.timestamp("us", tz="UTC"), TIMESTAMPTZ, 1),
                                     (pa.timestamp("ns"), TIMESTAMP_NS, 1000)):
        array = pa.array([micros * scale, None], pa.int64()).cast(arrow_type)
        got = [_py(t.apply_arrow(array, type_), type_) for t in (YEAR, MONTH, DAY, HOUR)]
        assert got == [[year, None], [month, None], [day, None], [hour, None]]
    days = pa.array([17486, -1, -366, None], pa.int32()).cast(pa.date32())
    assert [_py(t.apply_arrow(days, DATE), DATE) for t in (YEAR, MONTH, DAY)] == [
        [47, -1, -2, None], [574, -1, -13, None], [17486, -1, -366, None]]


# ------------------------------------------------------------------ edges found by mutation testing (issue 38)
def test_hash_byte_rules_of_the_remaining_types():
    # Java's BucketUtil: booleans as the longs 1 and 0, doubles by doubleToLongBits with every NaN
    # canonical (0x7ff8000000000000), a UUID by its 16 big-endian bytes however it is given
    assert murmur3_hash(True, BOOLEAN) == murmur3_hash(1, LONG)
    assert murmur3_hash(False, BOOLEAN) == murmur3_hash(0, LONG) != murmur3_hash(1, LONG)
    canonical = murmur3_hash(0x7FF8000000000000, LONG)
    other_nan = struct.unpack("<d", struct.pack("<q", 0x7FF8000000000001))[0]
    assert murmur3_hash(float("nan"), DOUBLE) == murmur3_hash(other_nan, DOUBLE) == canonical
    negative_bits = struct.unpack("<q", struct.pack("<d", -1.5))[0]
    assert negative_bits < 0 and murmur3_hash(-1.5, DOUBLE) == murmur3_hash(negative_bits, LONG)
    u = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    assert murmur3_hash(u.bytes, UUID) == murmur3_hash(bytearray(u.bytes), UUID) == murmur3_hash(u, UUID) == 1488055340
    with pytest.raises(ValidationError, match="Cannot hash values of type"):
        murmur3_hash({}, parse_transform("identity").result_type(StructType(())))


def test_widths_of_one_are_valid_and_of_zero_are_not():
    assert BucketTransform(1).apply(34, INT) == 0
    assert TruncateTransform(1).apply(-7, INT) == -7 and TruncateTransform(1).apply("abc", STRING) == "a"
    with pytest.raises(ValidationError, match=r"bucket\[0\]: N must be positive"):
        BucketTransform(0)
    for w in (0, -1):
        with pytest.raises(ValidationError, match=rf"truncate\[{w}\]: W must be positive"):
            TruncateTransform(w)


def test_truncate_wraps_like_java_at_the_bottom_of_the_range():
    # Java: v - (((v % w) + w) % w) overflows below MIN_VALUE and wraps to the top
    assert TruncateTransform(10).apply(-(2**63), LONG) == 2**63 - 2
    assert TruncateTransform(10).apply(-(2**31), INT) == 2**31 - 2
    assert TruncateTransform(10).apply(-(2**31), LONG) == -(2**31) - 2  # a long has the room


@pytest.mark.parametrize("a, b, source, expected", [
    ("truncate[10]", "truncate[5]", STRING, True),     # a longer prefix orders the shorter one
    ("truncate[5]", "truncate[10]", STRING, False),
    ("truncate[5]", "truncate[5]", STRING, True),
    ("truncate[5]", "truncate[10]", LONG, True),       # a multiple of the width
    ("truncate[10]", "truncate[5]", LONG, False),
    ("truncate[4]", "truncate[6]", LONG, False),
    ("truncate[5]", "truncate[10]", None, False),      # type unknown: both rules at once
    ("truncate[10]", "truncate[5]", None, False),
    ("truncate[5]", "truncate[5]", None, True),
    ("truncate[5]", "identity", STRING, False),
    ("truncate[5]", "bucket[5]", LONG, False),
    ("hour", "day", None, True), ("day", "day", None, True), ("day", "hour", None, False),
    ("month", "year", None, True), ("year", "month", None, False),
    ("day", "identity", None, False), ("day", "void", None, False),
    ("bucket[4]", "bucket[4]", LONG, True), ("bucket[4]", "bucket[8]", LONG, False),  # only itself
])
def test_which_orderings_satisfy_which(a, b, source, expected):
    assert parse_transform(a).satisfies_order_of(parse_transform(b), source) is expected


def test_time_transforms_are_equal_by_kind():
    assert YEAR == parse_transform("year") and hash(YEAR) == hash(parse_transform("year"))
    assert YEAR != MONTH and DAY != HOUR and DAY != "day"
    assert len({YEAR, MONTH, DAY, HOUR, parse_transform("day")}) == 4
    assert repr(DAY) == "DayTransform('day')" and repr(BucketTransform(4)) == "BucketTransform('bucket[4]')"


@pytest.mark.parametrize("transform, source", [
    (BucketTransform(4), INT), (TruncateTransform(3), STRING), (YEAR, DATE), (MONTH, DATE), (DAY, TIMESTAMP),
    (HOUR, TIMESTAMPTZ), (UnknownTransform("zorder"), LONG),
])
def test_a_null_partition_value_reads_null_like_java(transform, source):
    assert transform.to_human_string(None, source) == "null"


def test_an_unknown_transform_round_trips_but_never_applies():
    t = parse_transform("zorder[3]")
    assert isinstance(t, UnknownTransform) and str(t) == "zorder[3]" and t.can_transform(LONG)
    assert t.to_human_string(7, LONG) == "7"
    for apply in (lambda: t.apply(1, LONG), lambda: t.apply_arrow(pa.array([1]), LONG)):
        with pytest.raises(ValidationError, match=r"unsupported transform 'zorder\[3\]'; upgrade or drop"):
            apply()


def test_a_transform_refuses_a_type_it_cannot_apply_to():
    assert not IDENTITY.can_transform(StructType(())) and IDENTITY.can_transform(LONG)
    with pytest.raises(ValidationError, match=r"Cannot apply truncate\[3\] to a double value"):
        TruncateTransform(3).apply_arrow(pa.array([1.5]), DOUBLE)
    with pytest.raises(ValidationError, match=r"Cannot apply truncate\[3\] to a double value"):
        TruncateTransform(3).apply(1.5, DOUBLE)


DAY_MS = 86_400_000


@pytest.mark.parametrize("transform, source, array, values", [
    # date64 holds milliseconds: days are floored, before 1970 too
    (DAY, DATE, pa.array([0, DAY_MS - 1, -1, -DAY_MS, -DAY_MS - 1, None], pa.date64()), [0, 0, -1, -1, -2, None]),
    (BucketTransform(16), DATE, pa.array([-1, 3 * DAY_MS], pa.date64()), [-1, 3]),
    # other units than the source's micros (or nanos) are converted first
    (HOUR, TIMESTAMPTZ, pa.array([-1, 3_600_000, None], pa.timestamp("ms", tz="UTC")), [-1000, 3_600_000_000, None]),
    (DAY, TIMESTAMP, pa.array([-1, 86_400], pa.timestamp("s")), [-1_000_000, 86_400_000_000]),
    (BucketTransform(16), TIMESTAMP, pa.array([TS // 1000], pa.timestamp("ms")), [TS]),
    (BucketTransform(16), TIMESTAMPTZ, pa.array([TS // 1000], pa.timestamp("ms", tz="UTC")), [TS]),
    (BucketTransform(16), TIME, pa.array([81_068_000], pa.time32("ms")), [81_068_000_000]),
    (BucketTransform(16), TIMESTAMP_NS, pa.array([TS, -1], pa.timestamp("us")), [TS * 1000, -1000]),
    (HOUR, TIMESTAMPTZ_NS, pa.array([-1], pa.timestamp("us", tz="UTC")), [-1000]),
])
def test_arrow_arrays_of_other_units_transform_like_their_values(transform, source, array, values):
    expected = [transform.apply(v, source) for v in values]

    def ints(out: pa.Array) -> list:
        return (out.cast(pa.int32()) if pa.types.is_date(out.type) else out).to_pylist()  # day gives dates
    assert ints(transform.apply_arrow(array, source)) == expected
    assert ints(transform.apply_arrow(pa.chunked_array([array[:1], array[1:]]), source)) == expected
    assert ints(transform.apply_arrow(pa.chunked_array([array]), source)) == expected


def test_arrow_results_keep_their_types():
    ints = pa.array([-7, 7, None], pa.int32())
    assert VOID.apply_arrow(ints, INT).type == pa.int32() and VOID.apply_arrow(ints, INT).null_count == 3
    out = TruncateTransform(5).apply_arrow(ints, INT)
    assert out.type == pa.int32() and out.to_pylist() == [-10, 5, None]
    dec = DecimalType(9, 2)
    values = [Decimal("-0.05"), Decimal("12.34"), None]
    out = TruncateTransform(10).apply_arrow(pa.array(values, pa.decimal128(9, 2)), dec)
    assert out.type == pa.decimal128(9, 2) and out.to_pylist() == [TruncateTransform(10).apply(v, dec) for v in values]


def test_arrow_uuid_extension_arrays_hash_their_bytes():
    u = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    storage = pa.array([u.bytes, None], pa.binary(16))
    ext = pa.ExtensionArray.from_storage(pa.uuid(), storage)
    assert BucketTransform(16).apply_arrow(ext, UUID).to_pylist() == [BucketTransform(16).apply(u, UUID), None]
    assert BucketTransform(16).apply_arrow(storage, UUID).to_pylist() == [BucketTransform(16).apply(u, UUID), None]
