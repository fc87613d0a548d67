"""The one namespace of a source checkout: ``kgagents.graphs``, ``.nodes``, ``.tools``, ``.prompts`` and ``.evals``
are the folders beside ``kgagents/``, and nothing else of the checkout is a module of ``kgagents`` (not
``kgagents.tests``, ``kgagents.examples``, nor ``kgagents.kgagents``, which would be second copies of modules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIVE = ("graphs", "nodes", "tools", "prompts", "evals")
OTHERS = ("tests", "examples", "kgagents", "kgagents.core", "docs")

PROBE = f"""
import importlib, json, sys
FIVE, OTHERS = {FIVE!r}, {OTHERS!r}
import kgagents
found, refused = {{}}, []
for name in FIVE:
    found[name] = importlib.import_module("kgagents." + name).__file__
for name in OTHERS:
    try:
        importlib.import_module("kgagents." + name)
    except ModuleNotFoundError:
        refused.append(name)
print(json.dumps({{"kgagents": kgagents.__file__, "found": found, "refused": refused}}))
"""


def _probe(env: dict[str, str], cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _assert_one_namespace(seen: dict) -> None:
    assert seen["kgagents"] == str(ROOT / "kgagents" / "__init__.py")
    assert seen["found"] == {name: str(ROOT / name / "__init__.py") for name in FIVE}
    assert seen["refused"] == list(OTHERS)


def test_a_clone_on_the_path_maps_the_five_folders_and_nothing_else(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(ROOT)}
    _assert_one_namespace(_probe(env, tmp_path))


def _editable_checkout() -> Path | None:
    """The checkout the installed kgagents is an editable install of, if it is one."""
    try:
        text = metadata.distribution("kgagents").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    info = json.loads(text or "{}")
    if not info.get("dir_info", {}).get("editable") or not info.get("url", "").startswith("file://"):
        return None
    return Path(info["url"].removeprefix("file://")).resolve()


@pytest.mark.skipif(_editable_checkout() != ROOT, reason="kgagents is not installed editable from this checkout")
def test_the_editable_install_maps_the_five_folders_and_nothing_else(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _assert_one_namespace(_probe(env, tmp_path))
