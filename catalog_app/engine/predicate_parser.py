"""The predicate language: user-written predicates (the WHERE of a DELETE or UPDATE) and SET expressions, parsed
here into a small typed AST. It builds nothing of Spark's: the web process checks what users write with it,
`predicate_columns` builds an AST's Spark Column and `pruning` reads an AST against the catalog's statistics.

User text never reaches Spark as SQL. It is tokenized and parsed by recursive descent into the AST, checked
against the table's columns, a whitelist of operators and functions and simple type rules. Anything outside the
grammar is a PredicateError.

Grammar, lowest precedence first. Keywords and function names are case-insensitive, column names are not:

    or             := and ("OR" and)*
    and            := not ("AND" not)*
    not            := "NOT" not | comparison
    comparison     := additive [ ("=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=") additive
                               | "IS" ["NOT"] "NULL"
                               | ["NOT"] "IN" "(" or ("," or)* ")"
                               | ["NOT"] "BETWEEN" additive "AND" additive
                               | ["NOT"] "LIKE" string ]
    additive       := multiplicative (("+" | "-") multiplicative)*
    multiplicative := unary (("*" | "/" | "%") unary)*
    unary          := "-" unary | primary
    primary        := number | string | "TRUE" | "FALSE" | "NULL" | "DATE" string | "TIMESTAMP" string
                    | identifier | `quoted identifier` | function "(" [or ("," or)*] ")" | "(" or ")"

Row expressions (`parse_row_expression`: a merge's column rules, docs/merge-semantics.md#column-expressions) read
the columns of named rows (`base.amount`, `source.status`: a qualifier, a dot, a column; a name without one is
refused) and also take

    primary        := ... | "CASE" ("WHEN" or "THEN" or)+ ["ELSE" or] "END"
    function       := ... | GREATEST | LEAST

a zero literal divisor is refused, and they are evaluated on Python values by `predicate_values`, not by Spark.

Evaluation (`predicate_columns`) is Spark's: NULL is three-valued, `/` divides as fractions, and with ANSI mode
on a division by zero or an overflow fails the job. A string literal doubles a quote (`'it''s'`) and has no
backslash escapes. A TIMESTAMP literal without an offset is a wall-clock time in the Spark session's time zone,
as in Spark SQL.
"""

import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cached_property
from typing import Any

from catalog_app.engine.type_names import MAX_DECIMAL_PRECISION, is_decimal

MAX_TEXT_LENGTH = 10_000
MAX_DEPTH = 64
MAX_IN_ITEMS = 1_000
# Spark analyses expressions recursively on a small thread stack; an expression tree a few hundred levels deep
# overflows it. Nesting (MAX_DEPTH) alone does not bound this: each `+` of a chain `a + b + c ...` adds a level.
MAX_TREE_DEPTH = 200
_MAX_LONG = 2**63 - 1

# The inferred types of expressions.
BOOLEAN = "boolean"
NUMERIC = "numeric"
STRING = "string"
DATE = "date"
TIMESTAMP = "timestamp"
BINARY = "binary"
NULL = "null"

# The inferred type of a column of each column type (engine.types; decimals are NUMERIC): expressions cannot
# use columns of other types.
_COLUMN_TYPES = {
    "boolean": BOOLEAN,
    "int": NUMERIC,
    "long": NUMERIC,
    "float": NUMERIC,
    "double": NUMERIC,
    "string": STRING,
    "binary": BINARY,
    "date": DATE,
    "timestamp": TIMESTAMP,
}

NOT_TEXT = "the expression must be text"
EMPTY_TEXT = "the expression is empty"
TEXT_TOO_LONG = f"the expression is longer than {MAX_TEXT_LENGTH} characters"
TOO_DEEP = f"the expression nests deeper than {MAX_DEPTH} levels"
TOO_COMPLEX = (
    f"the expression is too complex: its operations nest more than {MAX_TREE_DEPTH} levels deep "
    "(group long chains of operators with parentheses)"
)
TOO_MANY_IN_ITEMS = f"an IN list takes at most {MAX_IN_ITEMS} values"
UNTERMINATED = "unterminated {what} starting here"
UNEXPECTED = "unexpected {what}"
TRAILING = "unexpected {what} after the end of the expression"
UNKNOWN_COLUMN = "unknown column {name!r}"
UNQUALIFIED = "name the row of column {name!r}: {qualified}"
DIVISION_BY_ZERO = "division by zero"
UNUSABLE_COLUMN = "column {name!r} has type {type_name!r}, which expressions cannot use"
UNKNOWN_FUNCTION = "unknown function {name!r}; the functions are: {known}"
NOT_SUPPORTED_WORD = "{word} is not supported: the text must be a single expression over the table's columns"
SUBQUERY = "subqueries (SELECT) are not supported"
NEEDS_TYPE = "{operator} needs {expected}, got {type}"
CANNOT_COMPARE = "cannot compare {left} with {right}"
DATETIME_HINT = " (write a date as DATE 'YYYY-MM-DD' and a time as TIMESTAMP 'YYYY-MM-DD HH:MM:SS')"
NOT_A_PREDICATE = "the predicate must be a condition (boolean), got {type}"
NO_ASSIGNMENTS = "no columns to set"
CANNOT_SET = "cannot set {type} column {name!r} to a {value_type} value"


class PredicateError(ValueError):
    """A rejected expression. `message` says why; `position` is the 0-based offset in the text where the problem
    is, or None when it is not about one place in the text."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


# ----------------------------------------------------------------------------------------------------------------
# The AST


@dataclass(frozen=True, kw_only=True)
class Expr:
    """A checked expression. `position` is where its text starts; `type` is its inferred type (BOOLEAN, NUMERIC,
    STRING, DATE, TIMESTAMP, BINARY or NULL). Build the Spark column with `predicate_columns.to_column`."""

    position: int
    type: str

    def children(self) -> tuple["Expr", ...]:
        return ()

    def columns(self) -> frozenset[str]:
        """The names of the columns the expression reads."""
        return frozenset().union(*(child.columns() for child in self.children()))

    @cached_property
    def depth(self) -> int:
        """The depth of the Spark expression tree that `predicate_columns.to_column` builds (approximately, never
        less)."""
        return 1 + max((child.depth for child in self.children()), default=0)


@dataclass(frozen=True, kw_only=True)
class Literal(Expr):
    value: bool | int | float | Decimal | str | date | datetime | None


@dataclass(frozen=True, kw_only=True)
class ColumnRef(Expr):
    name: str

    def columns(self) -> frozenset[str]:
        return frozenset({self.name})


@dataclass(frozen=True, kw_only=True)
class Negate(Expr):
    operand: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True, kw_only=True)
class Arithmetic(Expr):
    """`first` then each (operator, operand) of `rest`, left-associative: a - b - c is (a - b) - c."""

    first: Expr
    rest: tuple[tuple[str, Expr], ...]

    def children(self) -> tuple[Expr, ...]:
        return (self.first, *(operand for _, operand in self.rest))

    @cached_property
    def depth(self) -> int:
        count = len(self.rest)
        return max(count + self.first.depth, *(count - index + item.depth for index, (_, item) in enumerate(self.rest)))


_COMPARISON_OPERATORS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True, kw_only=True)
class Comparison(Expr):
    op: str  # one of "=", "!=", "<", "<=", ">", ">="
    left: Expr
    right: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, kw_only=True)
class Logical(Expr):
    op: str  # "AND" or "OR"
    operands: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.operands

    @cached_property
    def depth(self) -> int:
        # `predicate_columns` joins the operands as a balanced tree.
        return math.ceil(math.log2(len(self.operands))) + max(operand.depth for operand in self.operands)


@dataclass(frozen=True, kw_only=True)
class Not(Expr):
    operand: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True, kw_only=True)
class IsNull(Expr):
    operand: Expr
    negated: bool

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True, kw_only=True)
class In(Expr):
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, *self.items)


@dataclass(frozen=True, kw_only=True)
class Between(Expr):
    operand: Expr
    low: Expr
    high: Expr
    negated: bool

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, self.low, self.high)


@dataclass(frozen=True, kw_only=True)
class Like(Expr):
    """`pattern` is Spark's LIKE pattern: `%` any run, `_` one character, `\\` escapes."""

    operand: Expr
    pattern: str
    negated: bool

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class _Function:
    """A function's signature: `params` holds the accepted types of each argument, or None for an integer literal.
    The first `required` arguments are required (all when None); when `variadic`, the last parameter repeats.
    `result` None means the common type of the arguments. (Its Spark function: `predicate_columns`.)"""

    params: tuple[frozenset[str] | None, ...]
    result: str | None
    required: int | None = None
    variadic: bool = False

    def accepts(self, count: int) -> bool:
        low = len(self.params) if self.required is None else self.required
        return count >= low and (self.variadic or count <= len(self.params))

    def arity(self) -> str:
        low = len(self.params) if self.required is None else self.required
        plural = "" if low == 1 else "s"
        if self.variadic:
            return f"at least {low} argument{plural}"
        if low == len(self.params):
            return f"{low} argument{plural}"
        return f"{low} to {len(self.params)} arguments"

    def param(self, index: int) -> frozenset[str] | None:
        return self.params[min(index, len(self.params) - 1)]


_STRINGS = frozenset({STRING})
_NUMBERS = frozenset({NUMERIC})
_DATETIMES = frozenset({DATE, TIMESTAMP})
_VALUES = frozenset({BOOLEAN, NUMERIC, STRING, DATE, TIMESTAMP, BINARY})

FUNCTIONS: dict[str, _Function] = {
    "lower": _Function((_STRINGS,), STRING),
    "upper": _Function((_STRINGS,), STRING),
    "trim": _Function((_STRINGS,), STRING),
    "length": _Function((frozenset({STRING, BINARY}),), NUMERIC),
    "abs": _Function((_NUMBERS,), NUMERIC),
    "round": _Function((_NUMBERS, None), NUMERIC, required=1),
    "coalesce": _Function((_VALUES,), None, variadic=True),
    "concat": _Function((_STRINGS,), STRING, variadic=True),
    "substring": _Function((_STRINGS, None, None), STRING),
    "year": _Function((_DATETIMES,), NUMERIC),
    "month": _Function((_DATETIMES,), NUMERIC),
    "day": _Function((_DATETIMES,), NUMERIC),
    "to_date": _Function((frozenset({STRING, DATE, TIMESTAMP}),), DATE),
}


# Row expressions only (`parse_row_expression`): evaluated by `predicate_values`, not built for Spark.
ROW_FUNCTIONS: dict[str, _Function] = {
    **FUNCTIONS,
    "greatest": _Function((frozenset({NUMERIC, STRING, DATE, TIMESTAMP}),), None, required=2, variadic=True),
    "least": _Function((frozenset({NUMERIC, STRING, DATE, TIMESTAMP}),), None, required=2, variadic=True),
}


@dataclass(frozen=True, kw_only=True)
class Case(Expr):
    """`CASE WHEN condition THEN value ... [ELSE otherwise] END` (row expressions only): the value of the first
    condition that is true, else `otherwise` (NULL without one)."""

    branches: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr | None

    def children(self) -> tuple[Expr, ...]:
        items = tuple(part for branch in self.branches for part in branch)
        return items if self.otherwise is None else (*items, self.otherwise)


@dataclass(frozen=True, kw_only=True)
class Call(Expr):
    name: str  # a key of FUNCTIONS
    args: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.args


# ----------------------------------------------------------------------------------------------------------------
# Types


def _value_type(type_name: str) -> str | None:
    """The inferred type of a column of `type_name`, or None when expressions cannot use it."""
    normalized = type_name.strip().lower()
    return NUMERIC if is_decimal(normalized) else _COLUMN_TYPES.get(normalized)


def _common_type(left: str, right: str) -> str | None:
    """The type two values compare (or coalesce) as, or None when they cannot be compared."""
    if left in (NULL, right):
        return right
    if right == NULL:
        return left
    if {left, right} == {DATE, TIMESTAMP}:
        return TIMESTAMP
    return None


def _comparison_error(left: str, right: str, position: int) -> PredicateError:
    hint = DATETIME_HINT if {left, right} & {DATE, TIMESTAMP} and {left, right} & {STRING} else ""
    return PredicateError(CANNOT_COMPARE.format(left=left, right=right) + hint, position)


def _require(expr: Expr, accepted: frozenset[str], what: str) -> None:
    if expr.type != NULL and expr.type not in accepted:
        expected = " or ".join(f"a {name} value" for name in sorted(accepted))
        raise PredicateError(NEEDS_TYPE.format(operator=what, expected=expected, type=expr.type), expr.position)


_BOOLEANS = frozenset({BOOLEAN})


# ----------------------------------------------------------------------------------------------------------------
# Tokens

_NUMBER = "number"
_STRING = "string"
_IDENT = "identifier"
_QUOTED_IDENT = "quoted identifier"
_OP = "operator"
_END = "end"


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str  # as written
    position: int
    value: Any = None  # a number's value, a string's or quoted identifier's unquoted text


_NUMBER_PATTERN = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_IDENT_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("<=", ">=", "<>", "!=", "==", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ".")
_WHITESPACE = frozenset(" \t\r\n\f\v")
_REJECTED = {
    "--": "comments ('--') are not allowed",
    "/*": "comments ('/* */') are not allowed",
    ";": "';' is not allowed: the text must be a single expression",
    '"': "double quotes are not allowed: quote strings with single quotes ('...') and names with backquotes (`...`)",
}


def _tokenize(text: str) -> list[_Token]:
    """The tokens of `text`, ending with an _END token at len(text)."""
    tokens: list[_Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char in _WHITESPACE:
            index += 1
            continue
        for prefix, message in _REJECTED.items():
            if text.startswith(prefix, index):
                raise PredicateError(message, index)
        if char in "'`":
            value, end = _unquote(text, index)
            tokens.append(_Token(_STRING if char == "'" else _QUOTED_IDENT, text[index:end], index, value))
        elif match := _NUMBER_PATTERN.match(text, index):
            end = match.end()
            if end < len(text) and (text[end].isalnum() or text[end] in "._"):
                raise PredicateError(f"malformed number {text[index : end + 1]!r}", index)
            tokens.append(_Token(_NUMBER, match.group(), index, _number_value(match.group(), index)))
        elif match := _IDENT_PATTERN.match(text, index):
            end = match.end()
            tokens.append(_Token(_IDENT, match.group(), index, match.group()))
        elif op := next((op for op in _OPERATORS if text.startswith(op, index)), None):
            end = index + len(op)
            tokens.append(_Token(_OP, op, index))
        else:
            raise PredicateError(UNEXPECTED.format(what=f"character {char!r}"), index)
        index = end
    tokens.append(_Token(_END, "", len(text)))
    return tokens


def _unquote(text: str, start: int) -> tuple[str, int]:
    """The value of the quoted token at `start` (a doubled quote stands for one) and the offset after it."""
    quote = text[start]
    parts = []
    index = start + 1
    while (end := text.find(quote, index)) >= 0:
        parts.append(text[index:end])
        if not text.startswith(quote, end + 1):
            return "".join(parts), end + 1
        parts.append(quote)
        index = end + 2
    raise PredicateError(UNTERMINATED.format(what="string" if quote == "'" else "quoted name"), start)


def _number_value(text: str, position: int) -> int | float | Decimal:
    """An integer as int, a number with an exponent as float (Spark double), others as Decimal (Spark decimal)."""
    if "e" in text.lower():
        value = float(text)
        if not math.isfinite(value):
            raise PredicateError(f"number {text} is out of range", position)
        return value
    if "." not in text:
        # A long digit string is out of range; checking the length first also keeps int() from refusing it.
        if len(text.lstrip("0")) > len(str(_MAX_LONG)) or int(text) > _MAX_LONG:
            raise PredicateError(f"integer {text} is out of range (at most {_MAX_LONG})", position)
        return int(text)
    value = Decimal(text)
    _, digits, exponent = value.as_tuple()
    if max(len(digits), -int(exponent)) > MAX_DECIMAL_PRECISION:
        raise PredicateError(f"number {text} has more than {MAX_DECIMAL_PRECISION} digits", position)
    return value


def _is_zero(expr: Expr) -> bool:
    return isinstance(expr, Literal) and type(expr.value) is not bool and expr.value == 0


def _describe(token: _Token) -> str:
    return "end of the expression" if token.kind == _END else repr(token.text)


# ----------------------------------------------------------------------------------------------------------------
# The parser

_KEYWORDS = frozenset({"AND", "OR", "NOT", "IS", "NULL", "IN", "BETWEEN", "LIKE", "TRUE", "FALSE"})
# Words that are not columns here but would be SQL to Spark: named in the error instead of "unknown column".
_SQL_WORDS = frozenset(
    {
        "ALTER", "AS", "BY", "CALL", "CASE", "CAST", "CREATE", "DELETE", "DROP", "ELSE", "END", "EXEC", "EXECUTE",
        "EXISTS", "FROM", "GRANT", "GROUP", "HAVING", "INSERT", "INTO", "JOIN", "LIMIT", "MERGE", "ORDER",
        "SELECT", "SET", "TABLE", "THEN", "TRUNCATE", "UNION", "UPDATE", "VALUES", "WHEN", "WHERE", "WITH",
    }
)  # fmt: skip


class _Parser:
    """Parses one text against `columns` (name -> type name). Every method that reads an operand may raise
    PredicateError; nesting (parentheses, calls, NOT, unary minus) is limited to MAX_DEPTH."""

    def __init__(self, text: str, columns: Mapping[str, str], qualifiers: tuple[str, ...] = ()) -> None:
        if not isinstance(text, str):
            raise PredicateError(NOT_TEXT)
        if len(text) > MAX_TEXT_LENGTH:
            raise PredicateError(TEXT_TOO_LONG, MAX_TEXT_LENGTH)
        self._columns = columns
        self._qualifiers = qualifiers  # row expressions: the rows' names (columns are named `row.column`)
        self._functions = ROW_FUNCTIONS if qualifiers else FUNCTIONS
        self._tokens = _tokenize(text)
        self._index = 0
        self._depth = 0

    def parse(self) -> Expr:
        if self._peek().kind == _END:
            raise PredicateError(EMPTY_TEXT, 0)
        expr = self._or()
        if (token := self._peek()).kind != _END:
            raise PredicateError(TRAILING.format(what=_describe(token)), token.position)
        if expr.depth > MAX_TREE_DEPTH:
            raise PredicateError(TOO_COMPLEX, expr.position)
        return expr

    # -- token helpers

    def _peek(self, ahead: int = 0) -> _Token:
        return self._tokens[min(self._index + ahead, len(self._tokens) - 1)]

    def _next(self) -> _Token:
        token = self._peek()
        if token.kind != _END:
            self._index += 1
        return token

    def _at_keyword(self, *words: str, ahead: int = 0) -> bool:
        token = self._peek(ahead)
        return token.kind == _IDENT and token.text.upper() in words

    def _at_op(self, *ops: str) -> bool:
        token = self._peek()
        return token.kind == _OP and token.text in ops

    def _expect(self, found: bool, message: str) -> _Token:
        """The next token when `found`, else a PredicateError: `message`, then what was found."""
        token = self._peek()
        if not found:
            raise PredicateError(f"{message}, found {_describe(token)}", token.position)
        return self._next()

    @contextmanager
    def _nested(self, token: _Token) -> Iterator[None]:
        if self._depth >= MAX_DEPTH:
            raise PredicateError(TOO_DEEP, token.position)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    # -- the grammar, lowest precedence first

    def _or(self) -> Expr:
        return self._logical("OR", self._and)

    def _and(self) -> Expr:
        return self._logical("AND", self._not)

    def _logical(self, keyword: str, operand: Callable[[], Expr]) -> Expr:
        operands = [operand()]
        while self._at_keyword(keyword):
            self._next()
            operands.append(operand())
        if len(operands) == 1:
            return operands[0]
        for item in operands:
            _require(item, _BOOLEANS, keyword)
        return Logical(position=operands[0].position, type=BOOLEAN, op=keyword, operands=tuple(operands))

    def _not(self) -> Expr:
        if not self._at_keyword("NOT"):
            return self._comparison()
        token = self._next()
        with self._nested(token):
            operand = self._not()
        _require(operand, _BOOLEANS, "NOT")
        return Not(position=token.position, type=BOOLEAN, operand=operand)

    def _comparison(self) -> Expr:
        left = self._additive()
        token = self._peek()
        if token.kind == _OP and token.text in _COMPARISON_OPERATORS:
            self._next()
            right = self._additive()
            if _common_type(left.type, right.type) is None:
                raise _comparison_error(left.type, right.type, token.position)
            op = _COMPARISON_OPERATORS[token.text]
            return Comparison(position=left.position, type=BOOLEAN, op=op, left=left, right=right)
        if self._at_keyword("IS"):
            self._next()
            negated = self._at_keyword("NOT")
            if negated:
                self._next()
            self._expect(self._at_keyword("NULL"), "expected NULL after IS")
            return IsNull(position=left.position, type=BOOLEAN, operand=left, negated=negated)
        negated = self._at_keyword("NOT") and self._at_keyword("IN", "BETWEEN", "LIKE", ahead=1)
        if negated:
            self._next()
        if self._at_keyword("IN"):
            return self._in(left, negated)
        if self._at_keyword("BETWEEN"):
            return self._between(left, negated)
        if self._at_keyword("LIKE"):
            return self._like(left, negated)
        return left

    def _in(self, operand: Expr, negated: bool) -> Expr:
        self._next()
        items = self._list("IN", minimum=1, limit=MAX_IN_ITEMS)
        for item in items:
            if _common_type(operand.type, item.type) is None:
                raise _comparison_error(operand.type, item.type, item.position)
        return In(position=operand.position, type=BOOLEAN, operand=operand, items=tuple(items), negated=negated)

    def _between(self, operand: Expr, negated: bool) -> Expr:
        self._next()
        low = self._additive()
        self._expect(self._at_keyword("AND"), "expected AND between the bounds of BETWEEN")
        high = self._additive()
        for bound in (low, high):
            if _common_type(operand.type, bound.type) is None:
                raise _comparison_error(operand.type, bound.type, bound.position)
        return Between(position=operand.position, type=BOOLEAN, operand=operand, low=low, high=high, negated=negated)

    def _like(self, operand: Expr, negated: bool) -> Expr:
        self._next()
        pattern = self._expect(self._peek().kind == _STRING, "LIKE needs a quoted pattern such as 'ab%'")
        _require(operand, _STRINGS, "LIKE")
        return Like(position=operand.position, type=BOOLEAN, operand=operand, pattern=pattern.value, negated=negated)

    def _additive(self) -> Expr:
        return self._arithmetic(("+", "-"), self._multiplicative)

    def _multiplicative(self) -> Expr:
        return self._arithmetic(("*", "/", "%"), self._unary)

    def _arithmetic(self, ops: tuple[str, ...], operand: Callable[[], Expr]) -> Expr:
        first = operand()
        rest: list[tuple[str, Expr]] = []
        while self._at_op(*ops):
            rest.append((self._next().text, operand()))
        if not rest:
            return first
        for op, item in [(rest[0][0], first), *rest]:
            _require(item, _NUMBERS, f"'{op}'")
            if self._qualifiers and op in "/%" and item is not first and _is_zero(item):
                raise PredicateError(DIVISION_BY_ZERO, item.position)
        expr = Arithmetic(position=first.position, type=NUMERIC, first=first, rest=tuple(rest))
        if expr.depth > MAX_TREE_DEPTH:
            raise PredicateError(TOO_COMPLEX, expr.position)
        return expr

    def _unary(self) -> Expr:
        if not self._at_op("-"):
            return self._primary()
        token = self._next()
        with self._nested(token):
            operand = self._unary()
        _require(operand, _NUMBERS, "'-'")
        if isinstance(operand, Literal) and operand.type == NUMERIC:
            return Literal(position=token.position, type=NUMERIC, value=-operand.value)
        return Negate(position=token.position, type=operand.type, operand=operand)

    def _primary(self) -> Expr:
        token = self._peek()
        if token.kind == _NUMBER:
            return Literal(position=self._next().position, type=NUMERIC, value=token.value)
        if token.kind == _STRING:
            return Literal(position=self._next().position, type=STRING, value=token.value)
        if token.kind == _QUOTED_IDENT:
            return self._column(self._next())
        if token.kind == _IDENT:
            return self._word(self._next())
        if self._at_op("("):
            self._next()
            with self._nested(token):
                expr = self._or()
            self._expect(self._at_op(")"), f"expected ')' to close the '(' at position {token.position}")
            return expr
        raise PredicateError(UNEXPECTED.format(what=_describe(token)), token.position)

    def _word(self, token: _Token) -> Expr:
        word = token.text.upper()
        if word in ("TRUE", "FALSE"):
            return Literal(position=token.position, type=BOOLEAN, value=word == "TRUE")
        if word == "NULL":
            return Literal(position=token.position, type=NULL, value=None)
        if word in ("DATE", "TIMESTAMP") and self._peek().kind == _STRING:
            return self._typed_literal(token, self._next())
        if self._at_op("("):
            return self._call(token)
        if self._qualifiers and word == "CASE":
            return self._case(token)
        if self._qualifiers and token.text.lower() in self._qualifiers and self._at_op("."):
            self._next()
            named = self._peek().kind in (_IDENT, _QUOTED_IDENT)
            name = self._expect(named, f"expected a column after '{token.text}.'")
            qualified = f"{token.text.lower()}.{name.value}"
            return self._column(_Token(_QUOTED_IDENT, qualified, token.position, qualified))
        if self._qualifiers and self._at_op("."):
            rows = ", ".join(f"{row}.column" for row in self._qualifiers)
            raise PredicateError(f"{token.text!r} is not a row: name a column as {rows}", token.position)
        if word in _KEYWORDS:
            raise PredicateError(UNEXPECTED.format(what=f"keyword {word}"), token.position)
        return self._column(token)

    def _typed_literal(self, keyword: _Token, literal: _Token) -> Literal:
        is_date = keyword.text.upper() == "DATE"
        try:
            value = date.fromisoformat(literal.value) if is_date else datetime.fromisoformat(literal.value)
        except ValueError:
            expected = "YYYY-MM-DD" if is_date else "YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]"
            message = f"invalid {keyword.text.upper()} literal {literal.text}: expected {expected}"
            raise PredicateError(message, literal.position) from None
        return Literal(position=keyword.position, type=DATE if is_date else TIMESTAMP, value=value)

    def _column(self, token: _Token) -> ColumnRef:
        name = str(token.value)
        type_name = self._columns.get(name)
        if type_name is None:
            word = name.upper() if token.kind == _IDENT else ""
            if word == "SELECT":
                raise PredicateError(SUBQUERY, token.position)
            if word in _SQL_WORDS:
                raise PredicateError(NOT_SUPPORTED_WORD.format(word=word), token.position)
            if self._qualifiers and token.kind == _IDENT:
                qualified = " or ".join(f"{row}.{name}" for row in self._qualifiers)
                raise PredicateError(UNQUALIFIED.format(name=name, qualified=qualified), token.position)
            raise PredicateError(UNKNOWN_COLUMN.format(name=name), token.position)
        value_type = _value_type(type_name)
        if value_type is None:
            raise PredicateError(UNUSABLE_COLUMN.format(name=name, type_name=type_name), token.position)
        return ColumnRef(position=token.position, type=value_type, name=name)

    def _call(self, token: _Token) -> Call:
        name = token.text.lower()
        function = self._functions.get(name)
        if function is None:
            known = ", ".join(sorted(self._functions))
            raise PredicateError(UNKNOWN_FUNCTION.format(name=token.text, known=known), token.position)
        args = self._list(f"{name}()", minimum=0, limit=None)
        if not function.accepts(len(args)):
            message = f"{name}() takes {function.arity()}, got {len(args)}"
            raise PredicateError(message, token.position)
        result = NULL
        for index, arg in enumerate(args):
            accepted = function.param(index)
            if accepted is None:
                if not (isinstance(arg, Literal) and type(arg.value) is int):
                    message = f"{name}() needs an integer literal as argument {index + 1}"
                    raise PredicateError(message, arg.position)
                continue
            _require(arg, accepted, f"{name}()")
            common = _common_type(result, arg.type)
            if function.result is None and common is None:
                message = f"{name}() arguments must have one type: got {result} and {arg.type}"
                raise PredicateError(message, arg.position)
            result = common or result
        return Call(position=token.position, type=function.result or result, name=name, args=tuple(args))

    def _case(self, token: _Token) -> Case:
        branches: list[tuple[Expr, Expr]] = []
        otherwise = None
        with self._nested(token):
            if not self._at_keyword("WHEN"):
                message = "expected WHEN after CASE (write CASE WHEN condition THEN value ...)"
                raise PredicateError(f"{message}, found {_describe(self._peek())}", self._peek().position)
            while self._at_keyword("WHEN"):
                self._next()
                condition = self._or()
                _require(condition, _BOOLEANS, "WHEN")
                self._expect(self._at_keyword("THEN"), "expected THEN after the condition of WHEN")
                branches.append((condition, self._or()))
            if self._at_keyword("ELSE"):
                self._next()
                otherwise = self._or()
            self._expect(self._at_keyword("END"), "expected WHEN, ELSE or END in CASE")
        result = NULL
        for value in [value for _, value in branches] + ([otherwise] if otherwise is not None else []):
            common = _common_type(result, value.type)
            if common is None:
                message = f"the values of CASE must have one type: got {result} and {value.type}"
                raise PredicateError(message, value.position)
            result = common
        return Case(position=token.position, type=result, branches=tuple(branches), otherwise=otherwise)

    def _list(self, what: str, *, minimum: int, limit: int | None) -> list[Expr]:
        """The comma-separated expressions in parentheses after `what`."""
        opening = self._expect(self._at_op("("), f"expected '(' after {what}")
        items: list[Expr] = []
        with self._nested(opening):
            if not self._at_op(")"):
                items.append(self._or())
                while self._at_op(","):
                    self._next()
                    if limit is not None and len(items) >= limit:
                        raise PredicateError(TOO_MANY_IN_ITEMS, self._peek().position)
                    items.append(self._or())
            if len(items) < minimum:
                raise PredicateError(f"{what} needs at least {minimum} value", self._peek().position)
            self._expect(self._at_op(")"), f"expected ',' or ')' to close the '(' at position {opening.position}")
        return items


# ----------------------------------------------------------------------------------------------------------------
# The API


def parse_expression(text: str, columns: Mapping[str, str]) -> Expr:
    """Any scalar expression over `columns` (column name -> type name: boolean, int, long, float, double,
    decimal(p,s), string, binary, date or timestamp; columns of other types may be present but not referenced).
    Raises PredicateError when the text is not such an expression."""
    return _Parser(text, columns).parse()


def parse_row_expression(text: str, rows: tuple[str, ...], columns: Mapping[str, str]) -> Expr:
    """A scalar expression over the columns of named rows (`rows`, e.g. base, source, target; each has `columns`,
    as in parse_expression): a column is named `row.column`. Takes CASE, GREATEST and LEAST besides; a literal zero
    divisor is refused. Evaluated by `predicate_values`."""
    qualified = {f"{row}.{name}": type_name for row in rows for name, type_name in columns.items()}
    return _Parser(text, qualified, rows).parse()


def parse_predicate(text: str, columns: Mapping[str, str]) -> Expr:
    """A condition over `columns` (as in parse_expression) whose type is boolean."""
    expr = parse_expression(text, columns)
    if expr.type != BOOLEAN:
        raise PredicateError(NOT_A_PREDICATE.format(type=expr.type), expr.position)
    return expr


def parse_assignments(assignments: Mapping[str, str], columns: Mapping[str, str]) -> dict[str, Expr]:
    """Each column to set -> its new value, parsed with parse_expression. The keys must be names in `columns`, and
    each value must compare with its column's type; values are not cast to it. An error in a value names the
    column in its message, and its position is an offset in that value's text."""
    if not assignments:
        raise PredicateError(NO_ASSIGNMENTS)
    parsed: dict[str, Expr] = {}
    for name, text in assignments.items():
        if name not in columns:
            raise PredicateError(f"cannot set {UNKNOWN_COLUMN.format(name=name)}")
        column_type = _value_type(columns[name])
        if column_type is None:
            raise PredicateError(UNUSABLE_COLUMN.format(name=name, type_name=columns[name]))
        try:
            expr = parse_expression(text, columns)
        except PredicateError as error:
            raise PredicateError(f"in the value for {name!r}: {error.message}", error.position) from None
        if _common_type(column_type, expr.type) is None:
            message = CANNOT_SET.format(type=column_type, name=name, value_type=expr.type)
            raise PredicateError(message, expr.position)
        parsed[name] = expr
    return parsed
