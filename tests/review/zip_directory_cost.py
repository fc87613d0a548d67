"""Not a test: how much a bundle's zip directory costs before the 64-member limit is checked.

``kgagents.core.bundles.unpack`` opens the archive with ``zipfile.ZipFile``, which reads the whole central
directory into ``ZipInfo`` objects before ``bundle_problems`` counts them. Run:
``PYTHONPATH=$PWD .venv/bin/python tests/review/zip_directory_cost.py 1000000`` (a 100 MB file: about 25 s and
550 MB of memory on the review machine before the refusal).
"""

from __future__ import annotations

import resource
import struct
import sys
import tempfile
import time
from pathlib import Path

from kgagents.core.bundles import BundleError, unpack


def many_members(path: Path, n: int) -> None:
    with open(path, "wb") as f:
        offsets = []
        for i in range(n):
            name = f"a{i}.json".encode()
            offsets.append(f.tell())
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name)
        start = f.tell()
        for i in range(n):
            name = f"a{i}.json".encode()
            f.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0, 0, 0, 0,
                                0, offsets[i]) + name)
        end = f.tell()
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), end - start, start, 0))


if __name__ == "__main__":
    folder = Path(tempfile.mkdtemp(prefix="zip-directory-"))
    bundle = folder / "many.zip"
    many_members(bundle, int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
    started = time.monotonic()
    try:
        unpack(bundle, folder / "out")
    except BundleError as exc:
        print("refused:", str(exc)[:100])
    print(f"{bundle.stat().st_size / 1e6:.0f} MB archive: {time.monotonic() - started:.1f} s, "
          f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    bundle.unlink()
