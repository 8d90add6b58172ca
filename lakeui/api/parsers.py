"""Request parsing that refuses, as a 400, what the database or the engine cannot hold: a NUL character, a lone
UTF-16 surrogate, or JSON nested deeper than any request needs. Checked once here rather than per endpoint."""

from collections.abc import Iterator
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_JSON_DEPTH = 64


def _strings(data: Any) -> Iterator[str]:
    """Every key and string value of parsed JSON, without recursion; refuses nesting deeper than MAX_JSON_DEPTH."""
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise ParseError(f"JSON may be nested at most {MAX_JSON_DEPTH} levels deep.")
            if isinstance(value, dict):
                yield from (key for key in value if isinstance(key, str))
                stack.extend((item, depth + 1) for item in value.values())
            else:
                stack.extend((item, depth + 1) for item in value)


def text_problem(value: str) -> str | None:
    """Why a string cannot be stored (PostgreSQL refuses NUL; UTF-8 has no lone surrogates), or None."""
    if "\x00" in value:
        return "Text may not contain the NUL character (\\u0000)."
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "Text may not contain a lone UTF-16 surrogate (such as \\ud800)."
    return None


def check_parsed(data: Any) -> Any:
    for value in _strings(data):
        problem = text_problem(value)
        if problem:
            raise ParseError(problem)
    return data


class SafeJSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON may be nested at most {MAX_JSON_DEPTH} levels deep.") from None
        return check_parsed(data)


class SafeMultiPartParser(parsers.MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        result = super().parse(stream, media_type, parser_context)
        check_parsed({key: result.data.getlist(key) for key in result.data})
        check_parsed([upload.name for upload in result.files.values()])
        return result


class SafeFormParser(parsers.FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        check_parsed({key: data.getlist(key) for key in data})
        return data
