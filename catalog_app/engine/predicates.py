"""Temporary: the names services/data.py and services/data_jobs.py import from here, kept importable while those
modules are restructured. The predicate language is `predicate_parser` (text to a typed AST) and
`predicate_columns` (an AST to a Spark Column); delete this module once those two import from there."""

from catalog_app.engine.predicate_columns import to_column
from catalog_app.engine.predicate_parser import Expr, PredicateError, parse_assignments, parse_predicate

__all__ = ["Expr", "PredicateError", "parse_assignments", "parse_predicate", "to_column"]
