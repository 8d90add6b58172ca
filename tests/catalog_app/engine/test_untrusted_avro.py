"""Avro files of an engine's choosing (a commit's or a register's manifest list and manifests) are decoded by a
decoder that checks every length it reads: pyiceberg's Cython decoder, given random noise after an Avro header,
read past its buffer and killed the process with a segmentation fault within a few hundred files."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

JUNK = """
import random, sys
import pyiceberg.avro.file
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list
from catalog_app.engine.iceberg_incoming import FileRefused, decoded

io, rng, path, refused = PyArrowFileIO(), random.Random(7), sys.argv[1], 0
for _ in range(400):
    with open(path, "wb") as junk:
        junk.write(b"Obj\\x01" + rng.randbytes(64))
    try:
        with decoded("Manifest list", path):
            list(read_manifest_list(io.new_input(path)))
    except FileRefused:
        refused += 1
print(refused, type(pyiceberg.avro.file.new_decoder(b"")).__name__)
"""


def test_four_hundred_junk_manifest_lists_are_each_refused_and_the_process_lives(tmp_path):
    done = subprocess.run([sys.executable, "-c", JUNK, str(tmp_path / "junk.avro")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    refused, decoder = done.stdout.split()
    assert int(refused) == 400
    assert decoder == "CythonBinaryDecoder"  # LakeUI's own files, outside `decoded`, keep the fast decoder
