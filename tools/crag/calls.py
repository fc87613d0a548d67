"""Saved calls of CRAG's mock KG API: the file format (``{"calls": [{"call": "api.fn(args)",
"output_repr_truncated": "<repr>"}]}``), its reader, and the recovery of outputs that were cut off.

The mock server (:mod:`kgagents.tools.crag.server`) answers from them, and the static-KG loader of CRAG's
domain KGs (:mod:`kgagents.tools.pgraph.loaders`) builds a graph from the same file.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgagents.tools.crag.functions import CragAPIError, function

CALLS_FILE = ("data", "crag", "crag_mock_api_example_calls.json")
#: The longest call a calls file may hold: a function of the API and a few literal arguments (the saved calls are
#: under 100 characters). Parsing Python takes about a kilobyte per value of its text, and a call of 200 KB of
#: nested operators overflows the parser's stack.
MAX_CALL_CHARS = 65_536
#: How many shorter prefixes :func:`parse_repr` tries on an output that was cut off (the longest first: where
#: one parses, it is among the last few cut points; each try parses the text again).
MAX_CUTS_TRIED = 64


# ------------------------------------------------------------------------------------------------------------
# Saved calls
# ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SavedCall:
    function: str
    payload: dict[str, Any]
    result: Any
    truncated: bool


def default_calls_file() -> Path:
    """The saved calls that ship with kgagents (``evals/data/crag/``), found without importing
    :mod:`kgagents.evals`."""
    spec = importlib.util.find_spec("kgagents.evals")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder).joinpath(*CALLS_FILE)
        if path.is_file():
            return path
    raise FileNotFoundError("the saved CRAG calls that ship with kgagents (evals/data/crag/"
                            "crag_mock_api_example_calls.json) are missing; give a calls file")


def jsonable(value: Any) -> Any:
    """A Python value as JSON values: tuples become lists, keys text, NaN and infinities null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return value


def parse_repr(text: str) -> Any:
    """A Python literal (``repr`` output), recovering what it can of one that was cut off: the longest prefix
    that parses once its open brackets are closed, among the last :data:`MAX_CUTS_TRIED` places it can be
    cut."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    quote = ""
    i = 0
    closers = {"[": "]", "{": "}", "(": ")"}
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in closers:
            stack.append(closers[ch])
            cuts.append((i + 1, "".join(reversed(stack))))  # an empty container: a value cut off at its start
        elif ch in "]})":
            if stack:
                stack.pop()
            if stack:
                cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == "," and stack:
            cuts.append((i, "".join(reversed(stack))))
        i += 1
    for cut, closing in reversed(cuts[-MAX_CUTS_TRIED:]):
        try:
            return ast.literal_eval(text[:cut] + closing)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    raise ValueError("not a Python literal, even cut short")


def _recovered(text: str) -> Any:
    """A saved output as a value: the whole literal, or as much of a cut one as parses. A string cut off is
    closed with "…" first, so that its beginning survives (a number cut off is dropped: its digits would
    lie)."""
    best, best_size = None, -1
    for closer in ("", "…',", '…",'):  # the comma lets parse_repr cut right after the closed string
        try:
            value = parse_repr(text + closer)
        except ValueError:
            continue
        if _holds_a_set(value):
            continue  # a dict cut inside a key reads as a set: never an answer of the API
        size = len(json.dumps(jsonable(value), default=str))
        if size > best_size:
            best, best_size = value, size
    if best_size < 0:
        raise ValueError("not a Python literal, even cut short")
    return best


def _holds_a_set(value: Any) -> bool:
    if isinstance(value, (set, frozenset)):
        return True
    if isinstance(value, dict):
        return any(_holds_a_set(v) for v in value.values())
    return isinstance(value, (list, tuple)) and any(_holds_a_set(v) for v in value)


def _parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``api.fn(arg, name=value)`` → ``("fn", [arg], {"name": value})`` (literal arguments only); a call longer
    than :data:`MAX_CALL_CHARS` or nested too deeply for Python's parser is a :class:`ValueError` too."""
    if len(text) > MAX_CALL_CHARS:
        raise ValueError(f"a call of {len(text):,} characters, more than the {MAX_CALL_CHARS:,} a call of the API "
                         "may have")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a call: {exc.msg}") from exc
    except (MemoryError, RecursionError) as exc:  # "Parser stack overflowed": operators nested thousands deep
        raise ValueError("not a call: nested too deeply for Python's parser") from exc
    if not isinstance(node, ast.Call):
        raise ValueError("not a call")  # noqa: TRY004 - a malformed calls file, like every error here
    target = node.func
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    except ValueError as exc:
        raise ValueError(f"arguments must be literals: {exc}") from exc
    except (MemoryError, RecursionError) as exc:
        raise ValueError("arguments nested too deeply to read") from exc
    return name, args, kwargs


def load_calls(path: str | Path, data: Any = None) -> list[SavedCall]:
    """The saved calls of a file ``{"calls": [{"call": "api.fn(args)", "output...": "<repr>"}]}`` (or the
    list), or of ``data``, that file's content already parsed; errors name the file and the call."""
    path = Path(path)
    if data is None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ValueError(f"cannot read the CRAG calls file {path}: {exc}") from exc
    calls = data.get("calls") if isinstance(data, dict) else data
    if not isinstance(calls, list):
        raise ValueError(f"{path}: expected {{\"calls\": [{{\"call\": \"api.fn(args)\", "  # noqa: TRY004 - data
                         "\"output_repr_truncated\": ...}]}")
    out = []
    for n, entry in enumerate(calls):
        where = f"{path}, call {n}"
        if not isinstance(entry, dict) or not isinstance(entry.get("call"), str):
            raise ValueError(f"{where}: no \"call\"")  # noqa: TRY004 - a malformed file, not a wrong type
        key = next((k for k in entry if k.startswith("output") and isinstance(entry[k], str)), None)
        if key is None:
            raise ValueError(f"{where} ({entry['call'][:80]}): no output")
        try:
            name, args, kwargs = _parse_call(entry["call"])
            fn = function(name)
            payload = fn.bind(args, kwargs)
            answer = _recovered(entry[key])
        except (ValueError, CragAPIError) as exc:
            raise ValueError(f"{where} ({entry['call'][:80]}): {exc}") from exc
        result = answer["result"] if isinstance(answer, dict) and "result" in answer else answer
        cut = int(entry.get("output_chars") or 0) > len(entry[key])
        out.append(SavedCall(fn.name, payload, jsonable(result), cut))
    return out
