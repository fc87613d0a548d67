"""Work dirs and result files: a work dir prepared once and then found without touching the file system, and
the result file a call leaves read without following a link the code may have put there."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any


def read_result_file(path: Path, limit: int) -> dict[str, Any] | None:
    """The JSON object a call's runner wrote to ``path`` (its job folder's result file), or ``None`` when
    there is none to trust. The code can replace the file: with a symbolic link, which this process would
    follow outside every namespace (to a JSON file it may read and the code may not), or a FIFO, which would
    hang it. So the file is opened without following a link (``O_NOFOLLOW``) nor waiting (``O_NONBLOCK``), and
    taken only when it is a regular file with one link (no hard link to a file elsewhere), owned by this
    process's user, of at most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # none, or a link
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != os.getuid()
                or info.st_size > limit):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        return None
    return value if isinstance(value, dict) else None


#: Folders resolved (and created) in this process: the path as given -> the resolved path; most recent last.
_prepared: OrderedDict[str, Path] = OrderedDict()
_prepared_lock = threading.Lock()
_PREPARED_MAX = 4096


def prepare_work_dir(path: str | Path) -> Path:
    """``path`` created and resolved, and remembered: sandboxes for it or any folder under it then resolve
    their work dir without touching the file system (:class:`Sandbox` creates it when it first runs)."""
    resolved = Path(path).expanduser().resolve()
    resolved.mkdir(parents=True, exist_ok=True)
    with _prepared_lock:
        for key in {os.fspath(path), os.fspath(resolved)}:
            _prepared[key] = resolved
            _prepared.move_to_end(key)
        while len(_prepared) > _PREPARED_MAX:
            _prepared.popitem(last=False)
    return resolved


def _known_work_dir(path: Path) -> Path | None:
    """``path`` resolved through a prepared folder it lies in (the folders below it are ours: no links)."""
    with _prepared_lock:
        for base in (path, *path.parents):
            resolved = _prepared.get(os.fspath(base))
            if resolved is not None:
                return resolved / path.relative_to(base)
    return None
