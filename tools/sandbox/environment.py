"""What a sandboxed call's process is started with: the runner's program text, a cleared environment (no key
or secret of the application reaches the code) and the folders of the Python installation it may read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kgagents.tools.sandbox import runner

#: The program the sandboxed interpreter executes (tools/sandbox/runner.py), handed over as text with ``-c``.
_RUNNER = Path(runner.__file__).read_text(encoding="utf-8")


def _host_env_for_bwrap() -> dict[str, str]:
    # bwrap's own environment must be clean too: its pid 1 inside the sandbox keeps it in /proc/1/environ
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def _child_env(work_dir: Path, tmp_dir: Path | str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work_dir),
        "TMPDIR": str(tmp_dir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(Path(tmp_dir) / "matplotlib"),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PIP_NO_INDEX": "1",
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def _python_dirs(*, weak: bool = False) -> list[Path]:
    """Directories of the Python installation and virtual environment the child needs (read-only): the
    outermost ones, none under ``/usr`` (bubblewrap binds ``/usr`` as a whole). With ``weak``, for the weak
    mode's mount plan: every one of them, those in ``/usr`` and those inside another too (the standard
    library, site-packages), so that the plan binds each back over a folder it hides (a project in
    ``/usr/src/app``, a working directory inside the installation)."""
    import site  # only for the sandbox's read-only mounts
    import sysconfig  # only for the weak mode's mount plan

    raw: list[str] = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
                      os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    try:
        raw += site.getsitepackages()
    except AttributeError:  # pragma: no cover - very old virtualenv
        pass
    if weak:
        scheme = sysconfig.get_paths()
        raw += [scheme.get(name, "") for name in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths: list[Path] = []
    for entry in raw:
        if not entry:
            continue
        for p in (Path(entry).absolute(), Path(os.path.realpath(entry))):
            if p.exists() and p != Path("/") and p not in paths:
                paths.append(p)
    paths.sort(key=lambda p: len(p.parts))
    if weak:
        return paths
    kept: list[Path] = []
    for p in paths:
        if p == Path("/usr") or Path("/usr") in p.parents:
            continue  # bound as a whole
        if any(k == p or k in p.parents for k in kept):
            continue
        kept.append(p)
    return kept
