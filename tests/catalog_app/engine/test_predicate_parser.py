"""The predicate language's parser: what it accepts (columns read, inferred types) and what it refuses, where and
why. (Evaluated by real Spark: test_predicate_columns.py.)"""

import pytest

from catalog_app.engine.predicate_parser import (
    MAX_DEPTH,
    MAX_IN_ITEMS,
    MAX_TEXT_LENGTH,
    MAX_TREE_DEPTH,
    Expr,
    PredicateError,
    parse_assignments,
    parse_expression,
    parse_predicate,
)

COLUMNS = {
    "id": "int",
    "amount": "int",
    "price": "double",
    "cost": "decimal(10,2)",
    "region": "string",
    "note": "string",
    "flag": "boolean",
    "day": "date",
    "ts": "timestamp",
    "blob": "binary",
    "big total": "long",
    "tags": "array<string>",  # not in the DataFrame: expressions may not reference it, but it may be listed
}


def test_columns_are_the_ones_referenced():
    expr = parse_predicate("amount > 1 AND lower(region) IN ('eu', note) OR `big total` IS NULL", COLUMNS)
    assert isinstance(expr, Expr)
    assert expr.columns() == {"amount", "region", "note", "big total"}
    assert parse_expression("1 + 2", COLUMNS).columns() == frozenset()


def test_expressions_carry_inferred_types():
    types = {text: parse_expression(text, COLUMNS).type for text in ("amount * 2", "'x'", "NULL", "day", "ts", "blob")}
    assert types == {
        "amount * 2": "numeric",
        "'x'": "string",
        "NULL": "null",
        "day": "date",
        "ts": "timestamp",
        "blob": "binary",
    }
    assert parse_expression("coalesce(NULL, day, ts)", COLUMNS).type == "timestamp"


DEEP = "(" * (MAX_DEPTH + 1) + "flag" + ")" * (MAX_DEPTH + 1)
TOO_LONG = "flag OR " * (MAX_TEXT_LENGTH // 8) + "flag"
TOO_MANY = "amount IN (" + ", ".join(["1"] * (MAX_IN_ITEMS + 1)) + ")"

# Each case: (where, a fragment of the message, position).
REJECTED = [
    ("amont > 1", "unknown column 'amont'", 0),
    ("Amount > 1", "unknown column 'Amount'", 0),
    ("amount > 1 AND `regoin` = 'eu'", "unknown column 'regoin'", 15),
    ("exec('rm -rf') = 1", "unknown function 'exec'", 0),
    ("note = current_user()", "unknown function 'current_user'", 7),
    ("cast(amount AS string) = '1'", "unknown function 'cast'", 0),
    ("1; DROP TABLE x", "';' is not allowed", 1),
    ("amount = 1 -- comment", "comments", 11),
    ("amount = 1 /* comment */", "comments", 11),
    ("amount IN (SELECT 1)", "subqueries", 11),
    ("amount = (select max(amount) from t)", "subqueries", 10),
    ("flag UNION ALL", "unexpected 'UNION'", 5),
    ('region = "eu"', "double quotes", 9),
    ("(amount = 1", "expected ')' to close the '(' at position 0, found end of the expression", 11),
    ("lower(region = 'eu'", "expected ',' or ')'", 19),
    ("amount = 1)", "unexpected ')' after the end", 10),
    ("amount = 1 amount", "unexpected 'amount' after the end", 11),
    ("amount = 1 OR", "unexpected end of the expression", 13),
    ("amount = = 1", "unexpected '='", 9),
    ("amount = 1 = 1", "unexpected '='", 11),
    ("amount", "must be a condition (boolean), got numeric", 0),
    ("  lower(region)", "must be a condition (boolean), got string", 2),
    ("NULL", "must be a condition (boolean), got null", 0),
    ("region = 1", "cannot compare string with numeric", 7),
    ("1 < region", "cannot compare numeric with string", 2),
    ("day = '2024-01-01'", "cannot compare date with string (write a date as DATE", 4),
    ("blob = 'x'", "cannot compare binary with string", 5),
    ("amount IN (1, 'x')", "cannot compare numeric with string", 14),
    ("amount BETWEEN 1 AND 'x'", "cannot compare numeric with string", 21),
    ("region + 1 = 2", "'+' needs a numeric value, got string", 0),
    ("1 - region = 2", "'-' needs a numeric value, got string", 4),
    ("-region = 'x'", "'-' needs a numeric value, got string", 1),
    ("day * 2 = 1", "'*' needs a numeric value, got date", 0),
    ("flag AND amount", "AND needs a boolean value, got numeric", 9),
    ("amount OR flag", "OR needs a boolean value, got numeric", 0),
    ("NOT region", "NOT needs a boolean value, got string", 4),
    ("amount LIKE '1%'", "LIKE needs a string value, got numeric", 0),
    ("region LIKE note", "LIKE needs a quoted pattern", 12),
    ("lower(amount) = 'x'", "lower() needs a string value, got numeric", 6),
    ("lower(region, 1) = 'x'", "lower() takes 1 argument, got 2", 0),
    ("coalesce() IS NULL", "coalesce() takes at least 1 argument, got 0", 0),
    ("round(price, 1, 2) = 1", "round() takes 1 to 2 arguments, got 3", 0),
    ("round(price, amount) = 1", "round() needs an integer literal as argument 2", 13),
    ("substring(note, 1.5, 2) = 'x'", "substring() needs an integer literal as argument 2", 16),
    ("coalesce(region, amount) IS NULL", "coalesce() arguments must have one type: got string and numeric", 17),
    ("year(amount) = 1", "year() needs a date value or a timestamp value, got numeric", 5),
    ("amount IN ()", "IN needs at least 1 value", 11),
    ("amount IN 1", "expected '(' after IN", 10),
    ("amount BETWEEN 1 OR 2", "expected AND between the bounds of BETWEEN", 17),
    ("note IS 'x'", "expected NULL after IS", 8),
    ("flag AND OR flag", "unexpected keyword OR", 9),
    ("tags IS NULL", "column 'tags' has type 'array<string>'", 0),
    ("'unterminated = region", "unterminated string", 0),
    ("`unterminated = 1", "unterminated quoted name", 0),
    ("amount = 1.2.3", "malformed number", 9),
    ("amount = 12abc", "malformed number", 9),
    ("amount = 99999999999999999999", "out of range", 9),
    ("amount = 1e999", "out of range", 9),
    ("price = 0.1234567890123456789012345678901234567890", "more than 38 digits", 8),
    ("amount ! 1", "unexpected character '!'", 7),
    ("amount = 1 # comment", "unexpected character '#'", 11),
    ("région = 'x'", "unexpected character 'é'", 1),
    ("day = DATE '2024-02-30'", "invalid DATE literal '2024-02-30'", 11),
    ("ts > TIMESTAMP 'noon'", "invalid TIMESTAMP literal 'noon'", 15),
    (DEEP, f"nests deeper than {MAX_DEPTH} levels", MAX_DEPTH),
    ("NOT " * (MAX_DEPTH + 1) + "flag", f"nests deeper than {MAX_DEPTH} levels", 4 * MAX_DEPTH),
    ("amount" + " + 1" * MAX_TREE_DEPTH + " = 1", "too complex", 0),
    (TOO_LONG, f"longer than {MAX_TEXT_LENGTH} characters", MAX_TEXT_LENGTH),
    (TOO_MANY, f"at most {MAX_IN_ITEMS} values", 11 + 3 * MAX_IN_ITEMS),
    ("", "empty", 0),
    (" \n\t ", "empty", 0),
]


@pytest.mark.parametrize(("where", "message", "position"), REJECTED, ids=[case[0][:40] for case in REJECTED])
def test_rejected_predicates(where, message, position):
    with pytest.raises(PredicateError) as caught:
        parse_predicate(where, COLUMNS)
    assert message in caught.value.message
    assert str(caught.value) == caught.value.message
    assert caught.value.position == position
    assert isinstance(caught.value, ValueError)


# Each case: (assignments, a fragment of the message, position).
REJECTED_ASSIGNMENTS = [
    ({}, "no columns to set", None),
    ({"nope": "1"}, "cannot set unknown column 'nope'", None),
    ({"tags": "NULL"}, "column 'tags' has type 'array<string>'", None),
    ({"amount": "'x'"}, "cannot set numeric column 'amount' to a string value", 0),
    ({"day": "amount + 1"}, "cannot set date column 'day' to a numeric value", 0),
    ({"amount": "amount +"}, "in the value for 'amount': unexpected end of the expression", 8),
    ({"region": "'eu'", "amount": "amont + 1"}, "in the value for 'amount': unknown column 'amont'", 0),
    ({"amount": "1; DROP TABLE x"}, "';' is not allowed", 1),
    ({"amount": ""}, "in the value for 'amount': the expression is empty", 0),
    ({"amount": 1}, "the expression must be text", None),
]


@pytest.mark.parametrize(("assignments", "message", "position"), REJECTED_ASSIGNMENTS)
def test_rejected_assignments(assignments, message, position):
    with pytest.raises(PredicateError) as caught:
        parse_assignments(assignments, COLUMNS)
    assert message in caught.value.message
    assert caught.value.position == position


def test_error_position_defaults_to_none():
    error = PredicateError("broken")
    assert (error.message, error.position, str(error)) == ("broken", None, "broken")
