"""`field__any=values` finds exactly what `field__in=values` finds, whatever the values hold."""

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from catalog_app.models import Catalog
from catalog_app.models.lookups import array_text
from tests.support.catalogs import make_catalog

pytestmark = pytest.mark.django_db

AWKWARD = ["plain", "with,comma", 'a "quote"', "back\\slash", "{brace}", "NULL", " spaced ", "é", "x" * 150]


def test_text_values_match_as_they_are():
    users = get_user_model().objects
    for name in [*AWKWARD, "other"]:
        users.create(username=name)
    found = set(users.filter(username__any=AWKWARD).values_list("username", flat=True))
    assert found == set(AWKWARD) == set(users.filter(username__in=AWKWARD).values_list("username", flat=True))


def test_ids_and_numbers_match():
    catalogs = [make_catalog(name=f"c{n}") for n in range(3)]
    wanted = [catalogs[0].id, str(catalogs[2].id), uuid.uuid4()]  # a UUID, its text, and one that is not there
    assert set(Catalog.objects.filter(id__any=wanted).values_list("name", flat=True)) == {"c0", "c2"}
    assert Catalog.objects.filter(id__any=[catalogs[1].id.hex.upper()]).get().name == "c1"  # parsed as __in does
    with pytest.raises(ValidationError):
        list(Catalog.objects.filter(id__any=["not an id"]))
    texts = [str(c.id) for c in catalogs]  # all text: checked as one list, and a bad one among them still refused
    assert set(Catalog.objects.filter(id__any=texts).values_list("name", flat=True)) == {"c0", "c1", "c2"}
    with pytest.raises(ValidationError):
        list(Catalog.objects.filter(id__any=[*texts, f"{texts[0]},{texts[1]}"]))
    users = get_user_model().objects
    ids = [users.create(username=f"u{n}").id for n in range(3)]
    assert set(users.filter(id__any=[ids[0], ids[2], 10**9]).values_list("id", flat=True)) == {ids[0], ids[2]}


def test_array_text_quotes_every_string():
    assert array_text(["a,b", 'q"', "b\\s", 7]) == '{"a,b","q\\"","b\\\\s",7}'
