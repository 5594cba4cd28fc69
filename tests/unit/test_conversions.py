"""Single-value conversions against the Java 1.10.2 outputs listed in spec-onfile §4 and §7.3."""

import json
import math
import uuid
from decimal import Decimal

import pytest

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.conversions import (
    civil_from_days, days_from_civil, from_bytes, from_json, java_double_string, java_float_string,
    to_bytes, to_human_string, to_json, truncate_lower_bound, truncate_upper_bound,
)
from procedures.spec.types import (
    BINARY, BOOLEAN, DATE, DOUBLE, FLOAT, INT, LONG, STRING, TIME, TIMESTAMP, TIMESTAMP_NS, TIMESTAMPTZ,
    TIMESTAMPTZ_NS, UUID, DecimalType, FixedType, ListType, MapType, NestedField, StructType,
)

TS = 1510871468000000  # 2017-11-16T22:31:08
U = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")

BINARY_VECTORS = [
    (True, BOOLEAN, "01"),
    (False, BOOLEAN, "00"),
    (34, INT, "22000000"),
    (34, LONG, "2200000000000000"),
    (1.0, FLOAT, "0000803f"),
    (1.0, DOUBLE, "000000000000f03f"),
    (17486, DATE, "4e440000"),
    (81068000000, TIME, "008307e012000000"),
    (TS, TIMESTAMP, "00c3262d215e0500"),
    (TS, TIMESTAMPTZ, "00c3262d215e0500"),
    (TS * 1000, TIMESTAMP_NS, "00b8695f98b1f714"),
    ("iceberg", STRING, "69636562657267"),
    (U, UUID, "f79c3e09677c4bbda4793f349cb785e7"),
    (b"\x00\x01\x02\x03", FixedType(4), "00010203"),
    (b"\x00\x01\x02\x03", BINARY, "00010203"),
    (Decimal("14.20"), DecimalType(9, 2), "058c"),
    (Decimal("-14.20"), DecimalType(9, 2), "fa74"),
    (Decimal("1.28"), DecimalType(9, 2), "0080"),
    (Decimal("-1.28"), DecimalType(9, 2), "80"),
    (Decimal("0.00"), DecimalType(9, 2), "00"),
]


@pytest.mark.parametrize("value,type_,hexed", BINARY_VECTORS)
def test_binary_vectors_round_trip(value, type_, hexed):
    assert to_bytes(value, type_).hex() == hexed
    assert from_bytes(bytes.fromhex(hexed), type_) == value


def test_decimal_bound_keeps_the_column_scale():
    assert str(from_bytes(bytes.fromhex("00"), DecimalType(9, 2))) == "0.00"
    assert to_bytes(Decimal("14.2"), DecimalType(9, 2)).hex() == "058c"  # rescaled to the column
    with pytest.raises(ValidationError):
        to_bytes(Decimal("14.201"), DecimalType(9, 2))


def test_promoted_bounds_are_read_by_length():
    assert from_bytes(bytes.fromhex("22000000"), LONG) == 34
    assert from_bytes(bytes.fromhex("0000803f"), DOUBLE) == 1.0
    assert from_bytes(bytes.fromhex("4e440000"), TIMESTAMP) == 17486 * 86_400_000_000
    assert from_bytes(bytes.fromhex("4e440000"), TIMESTAMP_NS) == 17486 * 86_400_000_000_000
    assert from_bytes(bytes.fromhex("ffffffff"), TIMESTAMP) == -86_400_000_000


def test_boolean_nonzero_is_true_and_bad_lengths_fail():
    assert from_bytes(b"\x07", BOOLEAN) is True
    with pytest.raises(InvalidMetadataError, match="int bound of 3 bytes"):
        from_bytes(b"\x00\x00\x00", INT)
    with pytest.raises(ValidationError):
        to_bytes(2**31, INT)


JSON_VECTORS = [
    (True, BOOLEAN, True),
    (34, INT, 34),
    (34, LONG, 34),
    (1.0, DOUBLE, 1.0),
    (Decimal("14.20"), DecimalType(9, 2), "14.20"),
    (Decimal("0.00000001"), DecimalType(9, 8), "0.00000001"),
    (Decimal("2E+20"), DecimalType(9, -20), "2E+20"),
    (17486, DATE, "2017-11-16"),
    (3000000, DATE, "+10183-09-21"),
    (-800000, DATE, "-0221-09-04"),
    (81068000000, TIME, "22:31:08"),
    (81068123456, TIME, "22:31:08.123456"),
    (81068100000, TIME, "22:31:08.1"),
    (81060000000, TIME, "22:31:00"),
    (TS + 123456, TIMESTAMP, "2017-11-16T22:31:08.123456"),
    (1510871460000000, TIMESTAMP, "2017-11-16T22:31:00"),
    (-1, TIMESTAMP, "1969-12-31T23:59:59.999999"),
    (TS + 123456, TIMESTAMPTZ, "2017-11-16T22:31:08.123456+00:00"),
    (TS * 1000 + 123456789, TIMESTAMP_NS, "2017-11-16T22:31:08.123456789"),
    (TS * 1000 + 123456789, TIMESTAMPTZ_NS, "2017-11-16T22:31:08.123456789+00:00"),
    (1510871460000000100, TIMESTAMPTZ_NS, "2017-11-16T22:31:00.0000001+00:00"),
    ("iceberg", STRING, "iceberg"),
    (U, UUID, "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
    (b"\x00\x01\x02\xff", FixedType(4), "000102FF"),
    (b"\xab\x01", BINARY, "AB01"),
    ([1, 2, 3], ListType(1, INT), [1, 2, 3]),
    ({"a": 1}, MapType(1, STRING, 2, INT), {"keys": ["a"], "values": [1]}),
]


@pytest.mark.parametrize("value,type_,expected", JSON_VECTORS)
def test_json_vectors_round_trip(value, type_, expected):
    assert to_json(value, type_) == expected
    assert from_json(json.loads(json.dumps(expected)), type_) == value


def test_json_float_is_written_with_a_fraction_and_ints_are_refused():
    assert json.dumps(to_json(1.0, FLOAT)) == "1.0"
    assert to_json(1.100000023841858, FLOAT) == 1.1  # shortest float32 digits, as Java writes 1.1f
    for t in (FLOAT, DOUBLE):
        with pytest.raises(InvalidMetadataError, match="fraction"):
            from_json(1, t)


def test_json_decimal_scale_must_match_exactly():
    with pytest.raises(InvalidMetadataError, match="scale must be exactly 2"):
        from_json("14.2", DecimalType(9, 2))


def test_json_checks_uuid_fixed_and_timestamptz_offset():
    assert from_json("000102ff", FixedType(4)) == b"\x00\x01\x02\xff"  # either case is read
    with pytest.raises(InvalidMetadataError):
        from_json("000102", FixedType(4))
    with pytest.raises(InvalidMetadataError):
        from_json(U.hex, UUID)
    with pytest.raises(InvalidMetadataError, match=r"\+00:00"):
        from_json("2017-11-16T22:31:08-08:00", TIMESTAMPTZ)
    with pytest.raises(InvalidMetadataError):
        from_json("2017-11-16T22:31:08+00:00", TIMESTAMP)


def test_json_struct_default_is_keyed_by_field_id_and_omits_nulls():
    st = StructType((NestedField(1, "a", INT), NestedField(2, "b", STRING), NestedField(3, "c", LONG)))
    assert to_json((1, "bar", None), st) == {"1": 1, "2": "bar"}
    assert to_json({1: 1, 2: "bar"}, st) == {"1": 1, "2": "bar"}
    assert from_json({"1": 1, "2": "bar"}, st) == {1: 1, 2: "bar"}
    with pytest.raises(InvalidMetadataError, match="no field with id 9"):
        from_json({"9": 1}, st)


HUMAN_VECTORS = [
    (None, STRING, "null"),
    (True, BOOLEAN, "true"),
    (9, INT, "9"),
    (1.5, FLOAT, "1.5"),
    (1.1, FLOAT, "1.1"),
    (1e10, FLOAT, "1.0E10"),
    (1e20, DOUBLE, "1.0E20"),
    (1e-5, DOUBLE, "1.0E-5"),
    (1234567.0, DOUBLE, "1234567.0"),
    (12345678.0, DOUBLE, "1.2345678E7"),
    (0.001, DOUBLE, "0.001"),
    (-0.0, DOUBLE, "-0.0"),
    (math.nan, DOUBLE, "NaN"),
    (-math.inf, DOUBLE, "-Infinity"),
    (Decimal("-14.20"), DecimalType(9, 2), "-14.20"),
    (Decimal("0.00000001"), DecimalType(9, 8), "1E-8"),
    (17486, DATE, "2017-11-16"),
    (-800000, DATE, "-221-09-04"),
    (81060000000, TIME, "22:31"),
    (81068000000, TIME, "22:31:08"),
    (81068000100, TIME, "22:31:08.000100"),
    (81068100000, TIME, "22:31:08.100"),
    (0, TIME, "00:00"),
    (TS + 100, TIMESTAMP, "2017-11-16T22:31:08.0001"),
    (1510871460000000, TIMESTAMP, "2017-11-16T22:31:00"),
    (-1, TIMESTAMP, "1969-12-31T23:59:59.999999"),
    (TS + 100, TIMESTAMPTZ, "2017-11-16T22:31:08.0001+00:00"),
    (1510871460000000001, TIMESTAMP_NS, "2017-11-16T22:31:00.000000001"),
    (bytes.fromhex("aabbcc"), BINARY, "qrvM"),
    (bytes.fromhex("aabbcc"), FixedType(3), "qrvM"),
    (U, UUID, "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
    ("a b", STRING, "a b"),
]


@pytest.mark.parametrize("value,type_,expected", HUMAN_VECTORS)
def test_human_strings_match_java(value, type_, expected):
    assert to_human_string(value, type_) == expected


def test_java_number_strings():
    assert java_double_string(1.0 / 3) == "0.3333333333333333"
    assert java_double_string(2e-300) == "2.0E-300"
    assert java_float_string(1e-4) == "1.0E-4"


def test_calendar_round_trips_far_dates():
    for days in (-800000, -719529, -1, 0, 59, 60, 17486, 2932896, 3000000):
        assert days_from_civil(*civil_from_days(days)) == days
    assert civil_from_days(-1) == (1969, 12, 31)
    assert civil_from_days(11016) == (2000, 2, 29)


def test_string_bounds_truncate_by_code_points():
    assert truncate_lower_bound("iceberg", STRING, 3) == "ice"
    assert truncate_lower_bound("😀ab", STRING, 2) == "😀a"
    assert truncate_upper_bound("iceberg", STRING, 3) == "icf"
    assert truncate_upper_bound("ice", STRING, 3) == "ice"
    assert truncate_upper_bound("a\U0010ffffb", STRING, 2) == "b"  # max code point cannot grow
    assert truncate_upper_bound("\U0010ffff\U0010ffffx", STRING, 2) is None
    assert truncate_upper_bound("a\ud7ffb", STRING, 2) == "a\ue000"  # surrogates are skipped


def test_binary_bounds_truncate_by_bytes():
    assert truncate_lower_bound(b"\x01\x02\x03\x04\x05", BINARY, 3) == b"\x01\x02\x03"
    assert truncate_upper_bound(b"\x01\x02\x03\x04\x05", BINARY, 3) == b"\x01\x02\x04"
    assert truncate_upper_bound(b"\x01\xff\xff\x04", BINARY, 3) == b"\x02"
    assert truncate_upper_bound(b"\xff\xff\xff\x04", BINARY, 3) is None
    assert truncate_upper_bound(34, INT, 3) == 34
