"""Identifier allow-lists. Every name that reaches storage, a path or Spark passes through here first."""

import re

from lakeui.errors import ApplicationError

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# Branch and tag names: like identifiers, plus '-', '/' and '.', without empty, '.'-led or '..' segments.
# A check's name (checks_app), as merge requests and protected-branch rules name external checks too.
CHECK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.:/-]{0,99}")
REF_NAME = re.compile(r"(?!.*\.\.)(?!.*//)[A-Za-z0-9_][A-Za-z0-9_./-]{0,62}(?<![/.])")
PROPERTY_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
COMMIT_ID_PREFIX = re.compile(r"[0-9a-f]{8,32}")
MAX_PROPERTY_VALUE = 4096

MESSAGE_BAD_NAME = (
    "{what} name {name!r} is not allowed: use 1-63 letters, digits and underscores, not starting with a digit."
)
MESSAGE_BAD_REF_NAME = (
    "{what} name {name!r} is not allowed: use 1-63 letters, digits, '_', '-', '/' and '.', "
    "starting with a letter, digit or '_', without '..' or '//', not ending in '/' or '.'."
)


def check_identifier(name: object, what: str) -> str:
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise ApplicationError("invalid_name", MESSAGE_BAD_NAME.format(what=what, name=name))
    return name


def check_ref_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not REF_NAME.fullmatch(name) or COMMIT_ID_PREFIX.fullmatch(name):
        raise ApplicationError("invalid_name", MESSAGE_BAD_REF_NAME.format(what=what, name=name))
    return name


def check_properties(properties: object) -> dict[str, str]:
    if not isinstance(properties, dict):
        raise ApplicationError("invalid_properties", "Properties must be an object of string keys and values.")
    for key, value in properties.items():
        if not PROPERTY_KEY.fullmatch(key):
            raise ApplicationError(
                "invalid_properties", f"Property key {key!r} is not allowed: use letters, digits, '_', '.', '-'."
            )
        if not isinstance(value, str) or len(value) > MAX_PROPERTY_VALUE:
            raise ApplicationError(
                "invalid_properties", f"Property {key!r} must be a string of at most {MAX_PROPERTY_VALUE} characters."
            )
    return dict(properties)


def check_property_keys(keys: object) -> list[str]:
    if not isinstance(keys, list) or not all(isinstance(key, str) and PROPERTY_KEY.fullmatch(key) for key in keys):
        raise ApplicationError("invalid_properties", "Properties to unset must be a list of property keys.")
    return list(dict.fromkeys(keys))
