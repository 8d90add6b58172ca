"""JSON columns written with orjson hold what the standard library would have written."""

import datetime
import json
import uuid

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from catalog_app.models import Operation
from catalog_app.selectors.refs import ref_resolve
from lakeui.fields import json_dumps
from tests.support.catalogs import make_catalog

VALUES = [
    {"a": 1, "b": [1.5, None, True], "c": {"d": "é\u0000x"}},
    {"big": 2**70, "small": -(2**63), "digits": 1234567890123456789},  # beyond 64 bits: written by json
    {"float": 1e16, "tiny": 5e-324, "text": "1234567890123456789012"},
    [],
    "plain",
]


@pytest.mark.parametrize("value", VALUES)
def test_what_is_written_reads_back_as_it_was(value):
    assert json.loads(json_dumps(value)) == value


def test_non_text_keys_are_written_as_the_standard_library_writes_them():
    assert json.loads(json_dumps({1: "a", 2.5: "b"})) == json.loads(json.dumps({1: "a", 2.5: "b"}))


def test_an_encoder_formats_what_it_formats():
    moment = datetime.datetime(2026, 11, 24, 12, 30, 1, 123456, tzinfo=datetime.UTC)
    value = {"at": moment, "id": uuid.UUID(int=5)}
    assert json_dumps(value, DjangoJSONEncoder) == json.dumps(value, cls=DjangoJSONEncoder).replace(" ", "")
    with pytest.raises(TypeError):
        json_dumps({"at": moment})  # without an encoder, as json.dumps


@pytest.mark.django_db
def test_json_columns_round_trip_through_the_database():
    commit = ref_resolve(catalog=make_catalog(), ref="main").commit
    details = {"big": 2**70, "nested": {"k": [1, "two", None]}, "unicode": "ünï"}
    Operation.objects.create(commit=commit, position=99, object_id=uuid.uuid4(), object_kind="table", op="insert",
                             details=details)  # fmt: skip
    assert Operation.objects.get(commit=commit, position=99).details == details
    assert Operation.objects.filter(commit=commit, details__nested__k__1="two").exists()
