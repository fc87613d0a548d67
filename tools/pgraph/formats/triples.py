"""Triples: TSV (``head⇥relation⇥tail[⇥qualifiers as JSON]``) or JSON lines (``{"head", "relation", "tail",
"qualifiers"}`` or ``[head, relation, tail]``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.formats.common import (
    GraphFormat,
    Progress,
    Source,
    open_text,
)
from kgagents.tools.pgraph.model import GraphFormatError


def load_triples(builder: GraphBuilder, path: Path, *, progress: Progress | None = None, **_: Any) -> None:
    """TSV or JSON lines of (head, relation, tail[, qualifiers])."""
    tabular = path.suffix in (".tsv", ".txt") or path.name.endswith(".tsv.gz")
    try:
        with open_text(path) as f:
            read = 0
            for number, line in enumerate(f, 1):
                read += len(line)
                if progress is not None and number % 100_000 == 0:
                    progress(read)
                text = line.strip("\r\n")
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                where = f"{path}, line {number}"
                if tabular:
                    parts = text.split("\t")
                    if number == 1 and [p.strip().lower() for p in parts[:3]] == ["head", "relation", "tail"]:
                        continue
                    if len(parts) < 3 or not all(p.strip() for p in parts[:3]):
                        raise GraphFormatError(f"{where}: expected head<TAB>relation<TAB>tail, got {text[:200]!r}")
                    qualifiers = _qualifiers(parts[3], where) if len(parts) > 3 and parts[3].strip() else None
                    builder.add_edge(parts[0].strip(), parts[1].strip(), parts[2].strip(), qualifiers)
                    continue
                try:
                    item = json.loads(text)
                except ValueError as exc:
                    raise GraphFormatError(f"{where}: not valid JSON: {exc}") from exc
                if isinstance(item, list) and len(item) in (3, 4):
                    head, relation, tail = item[:3]
                    qualifiers = item[3] if len(item) == 4 else None
                elif isinstance(item, dict) and {"head", "relation", "tail"} <= set(item):
                    head, relation, tail = item["head"], item["relation"], item["tail"]
                    qualifiers = item.get("qualifiers")
                else:
                    raise GraphFormatError(f"{where}: expected {{\"head\", \"relation\", \"tail\"}} or "
                                           f"[head, relation, tail], got {text[:200]!r}")
                for label, value in (("head", head), ("relation", relation), ("tail", tail)):
                    if isinstance(value, (dict, list, bool)) or value is None or str(value).strip() == "":
                        raise GraphFormatError(f"{where}: the {label} must be a non-empty string, got {value!r}")
                if qualifiers is not None and not isinstance(qualifiers, dict):
                    raise GraphFormatError(f"{where}: qualifiers must be an object, got {qualifiers!r}")
                builder.add_edge(str(head), str(relation), str(tail), qualifiers)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read the triples file {path}: {exc}") from exc


def _qualifiers(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise GraphFormatError(f"{where}: the fourth column must be a JSON object of qualifiers: {exc}") from exc
    if not isinstance(value, dict):
        raise GraphFormatError(f"{where}: the fourth column must be a JSON object of qualifiers")
    return value


def _triple_line(line: str) -> bool:
    """Whether a line is a JSON triple ``[head, relation, tail(, qualifiers)]`` (not an ARK-V1 edge list)."""
    try:
        item = json.loads(line)
    except ValueError:
        return False
    return (isinstance(item, list) and len(item) in (3, 4)
            and not any(isinstance(v, (list, dict)) for v in item[:3]))


def detect(source: Source) -> bool:
    """A table of triples by its name, or JSON lines whose first line is a triple."""
    if source.is_dir:
        return False
    if source.table:
        return True
    if source.head.startswith("["):
        return _triple_line(source.first_line)
    return source.head.startswith("{") and '"head"' in source.first_line and '"relation"' in source.first_line


FORMAT = GraphFormat("triples", detect, load_triples)
