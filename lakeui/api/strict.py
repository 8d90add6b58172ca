"""Serializer parts that take JSON as typed, for bodies where a coerced value would be acted on: DRF's own fields
read `"3"` and `1.0` as the integer 3 and 1 and the number `5` as the text "5", and a serializer drops the keys it
does not know. These refuse each as a 400 naming the field."""

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

MESSAGE_UNKNOWN_FIELD = "Unknown field."


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: not a string of digits, a float, or a boolean."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A JSON string only: not a number or a boolean."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class ClosedSerializer(serializers.Serializer):
    """A JSON object with no key but its fields."""

    def to_internal_value(self, data: Any) -> dict:
        if isinstance(data, Mapping):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                raise serializers.ValidationError({key: [MESSAGE_UNKNOWN_FIELD] for key in unknown})
        return super().to_internal_value(data)
