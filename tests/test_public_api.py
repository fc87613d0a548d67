"""The faces of the packages: what each says it exports (``__all__``) exists, and every package that re-exports
names from its modules says which (docs/development.md lists the public modules)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

#: The modules users import (docs/development.md, "Public modules").
PUBLIC = ["kgagents.cli", "kgagents.core.config", "kgagents.core.errors", "kgagents.core.scripted",
          "kgagents.tools.files", "kgagents.tools.pgraph", "kgagents.nodes.context",
          # each workflow's graph module: its spec, builder and compiled graphs
          "kgagents.graphs.kgot", "kgagents.graphs.ark", "kgagents.graphs.grounded", "kgagents.graphs.agent_g",
          "kgagents.graphs.fusion", "kgagents.graphs.surfer", "kgagents.graphs.baselines", "kgagents.graphs.kg_rag",
          "kgagents.graphs.agent_g_baselines"]
PACKAGES = ("kgagents.core", "kgagents.cli", "kgagents.graphs", "kgagents.nodes", "kgagents.tools",
            "kgagents.prompts", "kgagents.evals")


def packages() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        module = importlib.import_module(package)
        names += [info.name for info in pkgutil.walk_packages(module.__path__, package + ".") if info.ispkg]
    return names


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_lists_what_it_exports_and_has_it(name):
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported and len(exported) == len(set(exported))
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"


def test_every_package_that_re_exports_names_lists_them():
    found = packages()
    assert len(found) >= 10  # kgagents.core, .cli, .graphs, .nodes, .tools and its subpackages, ...
    faces = []
    for name in found:
        module = importlib.import_module(name)
        tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
        imports = [node for node in tree.body if isinstance(node, ast.ImportFrom)
                   and (node.module or "").startswith(name + ".")]
        if imports:
            faces.append(name)
            assert hasattr(module, "__all__"), f"{name} re-exports names from its modules without __all__"
            re_exported = {alias.asname or alias.name for node in imports for alias in node.names}
            public = {n for n in re_exported if not n.startswith("_")}
            assert public <= set(module.__all__) | _used_only_inside(tree, public), name
    assert "kgagents.tools.pgraph" in faces and "kgagents.tools.files" in faces


def _used_only_inside(tree: ast.Module, names: set[str]) -> set[str]:
    """Names a package imports for its own code (called in its body), not to hand on."""
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return names & used
