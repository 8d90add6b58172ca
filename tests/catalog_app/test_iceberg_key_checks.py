"""The doubled-key check of an engine's append to a keyed table (catalog_app/engine/iceberg_incoming.py
`keys_doubled`) reads only the live segments whose key range (min/max in the catalog's statistics) overlaps the
new files' keys: an append of keys outside every segment's range opens no old segment, and a doubled key inside a
range is still refused."""

# ruff: noqa: F811 (pytest fixtures imported from test_iceberg_rest and named as arguments)

import pytest
from pyiceberg.exceptions import BadRequestError

from catalog_app.engine import iceberg_incoming
from catalog_app.models import DataFile as LakeFile
from tests.catalog_app.test_iceberg_rest import api_rows, client, iceberg, token  # noqa: F401
from tests.catalog_app.test_iceberg_writes import keyed_orders, rows


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The paths whose key columns the check reads (the live server runs in this process)."""
    paths: list[str] = []
    read = iceberg_incoming._read

    def counted(warehouse, path, names):
        paths.append(path)
        return read(warehouse, path, names)

    monkeypatch.setattr(iceberg_incoming, "_read", counted)
    return paths


def segment_paths() -> dict[str, str]:
    """Each live segment's path by the first key it holds (the tables here hold one table's segments)."""
    return {f.stats["1"]["min"]: f.path for f in LakeFile.objects.filter(kind=LakeFile.Kind.SEGMENT)}


def test_an_append_reads_only_segments_whose_key_range_overlaps(live_server, client, token, opened):
    main, _ = keyed_orders(live_server, client, token)  # ids 0-4
    main.load_table("shop.orders").append(rows(range(10, 15)))
    main.load_table("shop.orders").append(rows(range(20, 25)))
    old = segment_paths()
    assert sorted(old) == [0, 10, 20]

    # keys above every segment's range: the new file is read, no old segment
    opened.clear()
    main.load_table("shop.orders").append(rows([100, 101]))
    assert opened and not set(opened) & set(old.values())

    # keys between two ranges (5-9): no old segment either
    opened.clear()
    main.load_table("shop.orders").append(rows([7]))
    assert opened and not set(opened) & set(old.values())

    # a doubled key inside one segment's range: that segment is read and the append refused
    opened.clear()
    with pytest.raises(BadRequestError, match=r"twice: \[\(12,\)\]"):
        main.load_table("shop.orders").append(rows([12, 13]).slice(0, 1))
    assert old[10] in opened and old[0] not in opened and old[20] not in opened

    # a file spanning two ranges reads both, and names the key it doubles
    opened.clear()
    with pytest.raises(BadRequestError, match=r"twice: \[\(22,\)\]"):
        main.load_table("shop.orders").append(rows([8, 22]))
    assert {old[10], old[20]} <= set(opened) and old[0] not in opened
    assert sorted(r[0] for r in api_rows(client, "main", "shop.orders")[1]) == [
        *range(5),
        7,
        *range(10, 15),
        *range(20, 25),
        100,
        101,
    ]


def test_a_segment_without_statistics_of_the_key_is_read(live_server, client, token, opened):
    """A segment whose footer gave no statistics of the key column (a file written without them: the catalog then
    keeps none for that column) may hold any key: it is read on every append, and a key it doubles is found."""
    main, _ = keyed_orders(live_server, client, token)  # ids 0-4
    main.load_table("shop.orders").append(rows(range(10, 15)))
    old = segment_paths()
    LakeFile.objects.filter(path=old[10]).update(stats={})

    opened.clear()
    main.load_table("shop.orders").append(rows([100]))  # above both ranges: only the segment without statistics
    assert old[10] in opened and old[0] not in opened

    opened.clear()
    with pytest.raises(BadRequestError, match=r"twice: \[\(12,\)\]"):
        main.load_table("shop.orders").append(rows([12, 13]).slice(0, 1))
    assert old[10] in opened and old[0] not in opened
    assert sorted(r[0] for r in api_rows(client, "main", "shop.orders")[1]) == [*range(5), *range(10, 15), 100]
