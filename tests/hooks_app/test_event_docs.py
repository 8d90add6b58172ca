"""The documents describe the webhook events as they are: every kind LakeUI sends is documented as sent, none
as "reserved" (issue 41: check.finished, revert.completed and cherry_pick.completed were called reserved)."""

import re
from pathlib import Path

from lakeui.events import EVENT_KINDS

ROOT = Path(__file__).resolve().parents[2]


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_no_document_calls_a_sent_event_reserved():
    wrong = []
    for document in _documents():
        for number, line in enumerate(document.read_text().splitlines(), start=1):
            named = [kind for kind in EVENT_KINDS if f"`{kind}`" in line]
            if named and re.search(r"\breserved\b", line, re.I):
                wrong.append(f"{document.relative_to(ROOT)}:{number}: {named}")
    assert not wrong, wrong


def test_the_kinds_said_to_be_reserved_are_sent():
    """The premise of the test above: the services emit each of them."""
    sources = "\n".join(p.read_text() for p in ROOT.glob("*_app/services/*.py"))
    for constant in ("CHECK_FINISHED", "REVERT_COMPLETED", "CHERRY_PICK_COMPLETED"):
        assert re.search(rf"\b{constant}\b", sources), constant
