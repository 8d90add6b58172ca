"""Seconds per test file from pytest's --junitxml report, written to tests/file_seconds.json, from which the suite
orders the files it hands to its processes (tests/conftest.py): `python -m tests.support.file_seconds report.xml`."""

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "file_seconds.json"


def file_seconds(report: Path) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        module = []
        for part in case.get("classname", "").split("."):  # tests.app.test_x[.TestClass]
            module.append(part)
            if part.startswith("test_"):
                break
        seconds["/".join(module) + ".py"] += float(case.get("time") or 0)
    return {name: round(value, 1) for name, value in sorted(seconds.items())}


if __name__ == "__main__":
    TARGET.write_text(json.dumps(file_seconds(Path(sys.argv[1])), indent=1) + "\n")
