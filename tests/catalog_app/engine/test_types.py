"""Column types: what a user may write, how types widen, their Spark and Arrow types, and their values in JSON."""

import datetime
import decimal

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from catalog_app.engine.types import (
    SIMPLE_TYPES,
    arrow_type,
    check_default,
    decimal_digits,
    has_statistics,
    is_castable,
    is_decimal,
    is_pruned,
    is_widening,
    json_value,
    parse_type,
    python_value,
    spark_type,
    stat_json,
    stat_value,
    type_family,
    type_fits,
)
from lakeui.errors import ApplicationError


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("int", "int"),
        ("INTEGER", "int"),
        (" bigint ", "long"),
        ("Bool", "boolean"),
        ("real", "float"),
        ("Decimal( 10 , 2 )", "decimal(10,2)"),
        ("decimal(38,38)", "decimal(38,38)"),
        *[(name, name) for name in SIMPLE_TYPES],
    ],
)
def test_a_type_is_stored_by_its_canonical_name(written, canonical):
    assert str(parse_type(written)) == canonical


@pytest.mark.parametrize("written", ["uuid", "decimal(39,2)", "decimal(5,6)", "decimal(0,0)", "decimal(100,2)", "", 3])
def test_types_outside_the_allow_list_are_refused(written):
    with pytest.raises(ApplicationError) as caught:
        parse_type(written)
    assert caught.value.code == "unknown_type"


@pytest.mark.parametrize(
    ("old", "new", "widens"),
    [
        ("int", "long", True),
        ("int", "double", True),
        ("float", "double", True),
        ("long", "int", False),
        ("long", "double", False),
        ("int", "int", False),
        ("int", "decimal(10,0)", True),
        ("int", "decimal(9,0)", False),
        ("long", "decimal(21,2)", True),
        ("long", "decimal(20,2)", False),
        ("decimal(10,2)", "decimal(12,2)", True),
        ("decimal(10,2)", "decimal(12,3)", False),
        ("decimal(12,2)", "decimal(10,2)", False),
        ("string", "binary", False),
    ],
)
def test_types_only_widen(old, new, widens):
    assert is_widening(parse_type(old), parse_type(new)) is widens


@pytest.mark.parametrize(
    ("old", "new", "castable"),
    [
        ("int", "long", True),  # every widening
        ("long", "int", True),  # the rest: checked value by value when a merge settles the type
        ("decimal(10,0)", "long", True),
        ("decimal(10,2)", "decimal(10,1)", True),
        ("double", "decimal(10,2)", True),
        ("long", "string", True),
        ("string", "date", True),
        ("boolean", "string", True),
        ("double", "string", False),  # Spark and Arrow spell a float differently
        ("timestamp", "string", False),
        ("string", "timestamp", False),
        ("boolean", "int", False),
        ("binary", "string", False),
        ("date", "timestamp", False),
        ("int", "int", False),
    ],
)
def test_a_merge_may_cast_a_column_where_spark_and_arrow_cast_alike(old, new, castable):
    assert is_castable(parse_type(old), parse_type(new)) is castable


def test_each_type_has_its_spark_and_arrow_type():
    assert spark_type("decimal(10,2)") == T.DecimalType(10, 2)
    assert arrow_type("decimal(38,10)") == pa.decimal128(38, 10)
    assert arrow_type("timestamp") == pa.timestamp("us", tz="UTC")
    assert {name: spark_type(name).simpleString() for name in SIMPLE_TYPES} == {
        "boolean": "boolean",
        "int": "int",
        "long": "bigint",
        "float": "float",
        "double": "double",
        "string": "string",
        "binary": "binary",
        "date": "date",
        "timestamp": "timestamp",
    }
    with pytest.raises(ValueError, match="not a column type: uuid"):
        arrow_type("uuid")


def test_decimal_names():
    assert (is_decimal("decimal(10,2)"), is_decimal("double"), type_family("decimal(10,2)"), type_family("int")) == (
        True,
        False,
        "decimal",
        "int",
    )
    assert decimal_digits("decimal(38,10)") == (38, 10)


@pytest.mark.parametrize(
    ("value", "type_name", "expected"),
    [
        (1, "int", 1),
        (2**40, "long", 2**40),
        (1, "double", 1.0),
        ("1.5", "decimal(10,2)", decimal.Decimal("1.50")),
        (3, "decimal(3,2)", decimal.Decimal("3.00")),
        ("AAE=", "binary", b"\x00\x01"),
        ("2024-02-29", "date", datetime.date(2024, 2, 29)),
        ("2024-02-29T10:00:00+02:00", "timestamp", datetime.datetime(2024, 2, 29, 8, tzinfo=datetime.UTC)),
        ("2024-02-29 10:00:00", "timestamp", datetime.datetime(2024, 2, 29, 10, tzinfo=datetime.UTC)),
    ],
)
def test_incoming_json_values_become_values_of_the_type(value, type_name, expected):
    assert python_value(value, type_name) == expected


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (True, "int"),
        (2**31, "int"),
        (1.5, "long"),
        (1, "string"),
        ("yes", "boolean"),
        ("1.234", "decimal(10,2)"),
        ("123.4", "decimal(3,1)"),
        ("NaN", "decimal(10,2)"),
        ("2024-02-30", "date"),
        ("not base64!", "binary"),
    ],
)
def test_incoming_json_values_of_another_type_are_refused(value, type_name):
    with pytest.raises((TypeError, ValueError, decimal.InvalidOperation)):
        python_value(value, type_name)


@pytest.mark.parametrize(
    ("value", "type_name", "stored"),
    [
        (datetime.date(2024, 2, 29), "date", "2024-02-29"),
        (datetime.datetime(2024, 2, 29, 10, tzinfo=datetime.UTC), "timestamp", "2024-02-29T10:00:00"),
        (decimal.Decimal("1.50"), "decimal(10,2)", "1.50"),
        (7, "long", 7),
        ("eu", "string", "eu"),
    ],
)
def test_statistics_round_trip_through_the_catalogs_json(value, type_name, stored):
    assert stat_json(value) == stored
    assert stat_value(stored, type_name) == (value.replace(tzinfo=None) if type_name == "timestamp" else value)


def test_values_given_back_as_json():
    assert [json_value(v) for v in (b"\x00\x01", float("nan"), float("-inf"), None)] == [
        "AAE=",
        "NaN",
        "-Infinity",
        None,
    ]


@pytest.mark.parametrize(
    ("value", "type_name", "valid"),
    [
        (5, "int", True),
        (2**31, "int", False),
        (1.5, "double", True),
        ("x", "string", True),
        ("AAE=", "binary", False),
        ("2024-02-29", "date", True),
        ("2024-02-30", "date", False),
        ("12.34", "decimal(4,2)", True),
        ("123.4", "decimal(4,2)", False),
        (True, "boolean", True),
        (1, "boolean", False),
    ],
)
def test_defaults_are_json_literals_of_the_type(value, type_name, valid):
    if valid:
        assert check_default(value, parse_type(type_name), "c") == value
    else:
        with pytest.raises(ApplicationError) as caught:
            check_default(value, parse_type(type_name), "c")
        assert caught.value.code == "invalid_default"


@pytest.mark.parametrize(
    ("source", "type_name", "fits"),
    [
        (T.LongType(), "int", True),
        (T.DoubleType(), "int", False),
        (T.DoubleType(), "decimal(10,2)", True),
        (T.BooleanType(), "long", False),
        (T.StringType(), "date", True),
        (T.NullType(), "binary", True),
        (T.IntegerType(), "string", False),
        (T.DateType(), "timestamp", True),
    ],
)
def test_which_typed_source_columns_a_column_takes(source, type_name, fits):
    assert type_fits(source, type_name) is fits


def test_which_types_have_statistics_and_which_prune():
    names = [*SIMPLE_TYPES, "decimal(10,2)"]
    assert [name for name in names if not has_statistics(name)] == ["binary"]
    assert [name for name in names if is_pruned(name)] == [
        "int",
        "long",
        "string",
        "date",
        "timestamp",
        "decimal(10,2)",
    ]
