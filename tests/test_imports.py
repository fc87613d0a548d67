"""Imports sit at the top of their module; one inside a function says why on its line (docs/architecture.md).

An import inside a function is kept for a heavy or optional client that only some calls need (torch, faiss,
pyoxigraph, falkordb, matplotlib, ...): the line, or a comment line right above its group of imports, says so.
An import that only dodged a cycle has no reason to give: the floors' contracts (``make lint``) keep the
cycles out, so it goes to the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The floors held to the rule.
CHECKED = ("kgagents/core", "kgagents/cli", "kgagents/serve", "prompts", "tools", "nodes", "graphs", "evals")


def unexplained_imports(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every import inside a function that gives no reason."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(node):
            if not isinstance(sub, (ast.Import, ast.ImportFrom)):
                continue
            i = sub.lineno - 1
            if "#" in lines[i]:
                continue
            above = i - 1  # the comment may head the group of imports this one belongs to
            while above >= 0 and lines[above].lstrip().startswith(("import ", "from ")) and "#" not in lines[above]:
                above -= 1
            if above >= 0 and lines[above].lstrip().startswith("#"):
                continue
            found.append((sub.lineno, lines[i].strip()))
    return sorted(set(found))


def test_the_check_finds_an_unexplained_import_and_accepts_a_reason():
    source = ("def f():\n    import json\n    return json\n\n"
              "def g():\n    import torch  # seconds to import\n\n"
              "def h():\n    # the sparql extra\n    import pyoxigraph\n    from pyoxigraph import Store\n")
    assert unexplained_imports(source) == [(2, "import json")]


@pytest.mark.parametrize("floor", CHECKED)
def test_imports_inside_functions_say_why(floor):
    problems = []
    for path in sorted((ROOT / floor).rglob("*.py")):
        for line, text in unexplained_imports(path.read_text(encoding="utf-8")):
            problems.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    assert not problems, ("imports inside functions without a reason (move them to the top, or say on the line "
                          "why they load late):\n" + "\n".join(problems))
