"""Each workflow is a package inside ``nodes/`` (its context, state, replies and steps, docs/architecture.md),
and no module of one is a hall: every module under ``nodes/<workflow>/`` is at most 500 lines."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The most lines a module of a workflow package may have.
MOST_LINES = 500


def workflow_packages() -> list[Path]:
    """Every package folder inside ``nodes/`` (one per workflow), found on disk so that a new one is
    covered."""
    return sorted(p.parent for p in (ROOT / "nodes").glob("*/__init__.py"))


def test_the_split_workflows_are_packages():
    names = {p.name for p in workflow_packages()}
    assert {"grounded", "ark"} <= names
    assert not (ROOT / "nodes" / "grounded.py").exists() and not (ROOT / "nodes" / "ark.py").exists()


@pytest.mark.parametrize("package", workflow_packages(), ids=lambda p: p.name)
def test_no_module_of_a_workflow_package_is_over_500_lines(package):
    long = {str(path.relative_to(ROOT)): count for path in sorted(package.rglob("*.py"))
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert not long, f"modules over {MOST_LINES} lines (split them by what they do): {long}"
