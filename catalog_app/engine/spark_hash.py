"""Spark's `xxhash64` of a row's values, computed here: `writes.write_segments` names a partition's folder by this
hash of the partition values (and whether each is NULL), and a segment written here with pyarrow is put in the
folder Spark would have chosen. Pure Python: a few rows at a time.

Spark (`catalyst.expressions.XxHash64`, seed 42) hashes the values one after another, each hash the seed of the
next; a NULL leaves the hash as it is. Booleans, ints and dates hash as 4 bytes; longs and timestamps (micros) as 8;
floats and doubles as their bits (-0.0 as 0.0, every NaN as Java's one NaN); decimals of up to 18 digits as their
unscaled long, wider ones as the bytes of Java's `BigInteger.toByteArray` of it; strings (UTF-8) and binary as
their bytes. The byte hash is the standard XXH64.
"""

import datetime
import decimal
import math
import struct
from collections.abc import Sequence
from typing import Any

from catalog_app.engine.types import decimal_digits, is_decimal

SEED = 42
_MASK = 2**64 - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MAX_LONG_DIGITS = 18


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _fmix(value: int) -> int:
    value ^= value >> 33
    value = (value * _P2) & _MASK
    value ^= value >> 29
    value = (value * _P3) & _MASK
    return value ^ (value >> 32)


def _round(accumulator: int, lane: int) -> int:
    accumulator = (accumulator + lane * _P2) & _MASK
    return (_rotl(accumulator, 31) * _P1) & _MASK


def _merge(accumulator: int, lane: int) -> int:
    accumulator ^= _round(0, lane)
    return (accumulator * _P1 + _P4) & _MASK


def hash_int(value: int, seed: int) -> int:
    h = (seed + _P5 + 4) & _MASK
    h ^= ((value & 0xFFFFFFFF) * _P1) & _MASK
    h = (_rotl(h, 23) * _P2 + _P3) & _MASK
    return _fmix(h)


def hash_long(value: int, seed: int) -> int:
    h = (seed + _P5 + 8) & _MASK
    h ^= (_rotl(((value & _MASK) * _P2) & _MASK, 31) * _P1) & _MASK
    h = (_rotl(h, 27) * _P1 + _P4) & _MASK
    return _fmix(h)


def hash_bytes(data: bytes, seed: int) -> int:
    """The standard XXH64 of `data`."""
    length, offset = len(data), 0
    if length >= 32:
        lanes = [(seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK, seed & _MASK, (seed - _P1) & _MASK]
        while offset + 32 <= length:
            words = struct.unpack_from("<4Q", data, offset)
            lanes = [_round(lane, word) for lane, word in zip(lanes, words, strict=True)]
            offset += 32
        h = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _MASK
        for lane in lanes:
            h = _merge(h, lane)
    else:
        h = (seed + _P5) & _MASK
    h = (h + length) & _MASK
    while offset + 8 <= length:
        h ^= _round(0, struct.unpack_from("<Q", data, offset)[0])
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK
        offset += 8
    if offset + 4 <= length:
        h ^= (struct.unpack_from("<I", data, offset)[0] * _P1) & _MASK
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK
        offset += 4
    while offset < length:
        h ^= (data[offset] * _P5) & _MASK
        h = (_rotl(h, 11) * _P1) & _MASK
        offset += 1
    return _fmix(h)


def _java_bytes(number: int) -> bytes:
    """Java's `BigInteger.toByteArray`: the shortest two's complement, big-endian."""
    bits = number.bit_length() if number >= 0 else (~number).bit_length()
    return number.to_bytes(bits // 8 + 1, "big", signed=True)


def hash_value(value: Any, type_name: str, seed: int) -> int:
    """The hash of one value of column type `type_name` (as Arrow gives it: dates, UTC-aware datetimes, Decimals)."""
    if value is None:
        return seed
    if type_name == "boolean":
        return hash_int(int(value), seed)
    if type_name == "int":
        return hash_int(value, seed)
    if type_name == "long":
        return hash_long(value, seed)
    if type_name == "date":
        return hash_int((value - datetime.date(1970, 1, 1)).days, seed)
    if type_name == "timestamp":
        delta = value - _EPOCH
        return hash_long((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds, seed)
    if type_name == "float":
        value = 0.0 if value == 0 else value
        bits = 0x7FC00000 if math.isnan(value) else struct.unpack("<I", struct.pack("<f", value))[0]
        return hash_int(bits, seed)
    if type_name == "double":
        value = 0.0 if value == 0 else value
        bits = 0x7FF8000000000000 if math.isnan(value) else struct.unpack("<Q", struct.pack("<d", value))[0]
        return hash_long(bits, seed)
    if is_decimal(type_name):
        precision, scale = decimal_digits(type_name)
        unscaled = int(value.scaleb(scale, context=decimal.Context(prec=80)))
        if precision <= MAX_LONG_DIGITS:
            return hash_long(unscaled, seed)
        return hash_bytes(_java_bytes(unscaled), seed)
    if type_name == "string":
        return hash_bytes(value.encode("utf-8"), seed)
    if type_name == "binary":
        return hash_bytes(bytes(value), seed)
    raise ValueError(f"no hash for column type {type_name}")


def xxhash64(values: Sequence[tuple[Any, str]]) -> int:
    """Spark's `xxhash64(v1, v2, ...)` of (value, column type) pairs, as the signed long Spark gives."""
    h = SEED
    for value, type_name in values:
        h = hash_value(value, type_name, h)
    return h - 2**64 if h >= 2**63 else h
