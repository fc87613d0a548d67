"""Every exception class the project defines derives from the one root, ``kgagents.core.errors.KGAgentsError``."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from kgagents.core.errors import KGAgentsError

#: The packages of the project. ``kgagents`` itself is not walked as a whole: in a source checkout the five
#: folders beside it are found by its finder, not on its ``__path__``, so a walk of it would miss them.
PACKAGES = ("kgagents.core", "kgagents.cli", "kgagents.graphs", "kgagents.nodes", "kgagents.tools",
            "kgagents.prompts", "kgagents.evals", "kgagents.serve")
BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if inspect.isclass(value) and issubclass(value, BaseException)}


def project_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names.append(package)
        names += [info.name for info in pkgutil.walk_packages(module.__path__, package + ".")]
    return sorted(names)


def base_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def test_every_exception_class_derives_from_the_root():
    modules = project_modules()
    assert len(modules) > 100  # the walk found the project, not an empty folder
    outside, checked = [], 0
    for name in modules:
        module = importlib.import_module(name)
        # module-level classes, whatever they derive from (a library's exception counts too)
        for attr, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                checked += 1
                if issubclass(value, KeyboardInterrupt):  # an interruption, not an error: no `except Exception`
                    continue                              # may catch it, so it stays outside the root
                if not issubclass(value, KGAgentsError):
                    outside.append(f"{name}.{attr}")
        # classes defined inside functions or other classes: by their bases as written
        tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and id(node) not in top:
                bases = {base_name(base) for base in node.bases}
                if bases & BUILTIN_EXCEPTIONS and "KGAgentsError" not in bases:
                    outside.append(f"{name}: class {node.name} (line {node.lineno})")
    assert checked >= 30  # about 34 today
    assert not outside, f"exception classes outside KGAgentsError: {outside}"


@pytest.mark.parametrize(("path", "builtin"), [
    ("kgagents.tools.pgraph.model.GraphFormatError", ValueError),
    ("kgagents.tools.kg.cypher_text.CypherRejected", ValueError),
    ("kgagents.evals.datasets.DatasetError", ValueError),
    ("kgagents.core.config.ConfigurationError", RuntimeError),
    ("kgagents.tools.base.ToolFailure", RuntimeError),
    ("kgagents.nodes.llm.LLMError", RuntimeError),
])
def test_the_root_keeps_each_classes_builtin_base(path, builtin):
    """Callers that catch ValueError or RuntimeError go on catching what they caught before."""
    module, _, attr = path.rpartition(".")
    cls = getattr(importlib.import_module(module), attr)
    assert issubclass(cls, KGAgentsError) and issubclass(cls, builtin)
