import uuid

from catalog_app.selectors.refs import Chain


def table_has_rows(chain: Chain, *, table_id: uuid.UUID) -> bool:
    """Whether the table holds rows at this commit. Rows live in segments, which the table-data layer
    registers; until a table has segments it is empty, so this is False for every table so far."""
    return False
