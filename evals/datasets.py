"""Benchmark loaders: every dataset becomes a list of :class:`Item` plus the name of its scorer.

- ``gaia``: a local copy of the gated Hugging Face dataset ``gaia-benchmark/GAIA`` (``metadata.jsonl`` or
  ``metadata.parquet`` per split, attachments next to it); attachments are given to workflows as file paths.
- ``simpleqa``: the public CSV (columns ``metadata, problem, answer``) from a local path.
- ``cr-lt`` / ``colota``: registered by :mod:`kgagents.evals.colota` (the ARK-V1 loaders) when that module exists; their
  files ship with kgagents, so they load without a path.

Other datasets plug in with :func:`register_dataset`.
"""

from __future__ import annotations

import ast
import csv
import importlib
import importlib.util
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgagents.core.errors import KGAgentsError
from kgagents.core.extras import require
from kgagents.core.jsonl import json_lines


class DatasetError(KGAgentsError, ValueError):
    """A dataset cannot be loaded: missing or malformed files; the message says what to do."""


@dataclass
class Item:
    """One benchmark question."""

    id: str
    question: str
    gold: Any
    attachments: list[str] = field(default_factory=list)
    group: str = ""
    """The level (GAIA) or domain/topic (SimpleQA) the report breaks results down by."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """Extra graph inputs for workflows that need more than a question (e.g. an ARK-V1 subgraph)."""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dataset:
    name: str
    split: str
    items: list[Item]
    scorer: str
    group_label: str = "Group"


Loader = Callable[[Path, str], list[Item]]


@dataclass(frozen=True)
class ProtocolLeg:
    """One part of a paper's protocol: every item ``runs`` times at ``temperature``."""

    temperature: float
    runs: int

    @property
    def name(self) -> str:
        """The leg's result folder inside the protocol's, e.g. ``T0.7-R30``."""
        return f"T{self.temperature:g}-R{self.runs}"


@dataclass(frozen=True)
class Protocol:
    """A paper's evaluation protocol on a dataset (``kgagents eval --protocol NAME``): its legs, the base seed of
    their runs (run r gets ``seed + r`` where the provider takes a seed), and its results table."""

    legs: tuple[ProtocolLeg, ...]
    table: Callable[[str, list[tuple[ProtocolLeg, list[dict[str, Any]]]]], str]
    """``table(model label, [(leg, its result records), ...])``: the results laid out as the paper's table."""
    seed: int = 0
    description: str = ""


@dataclass
class DatasetSpec:
    """How to load one benchmark. ``load(path, split)`` returns its items."""

    name: str
    load: Loader
    scorer: str
    splits: tuple[str, ...]
    default_split: str
    group_label: str
    how_to_get: str
    """Shown when the data is missing: where the files come from."""
    default_data: Path | None = None
    """Files that ship with kgagents, loaded when no path is given (see :func:`packaged_data`)."""
    context: dict[str, Any] = field(default_factory=dict)
    """Context values a run on this dataset needs (e.g. Agent-G's ``task``): applied to every workflow whose
    context has the field, under the values the user sets (see :func:`dataset_context`)."""
    protocols: dict[str, Protocol] = field(default_factory=dict)
    """Named evaluation protocols of the papers that use this dataset (e.g. ``paper`` for CR-LT: ARK-V1's
    Table III), run by ``kgagents eval --protocol NAME`` (see :func:`dataset_protocol`)."""


DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> None:
    """Add (or replace) a dataset; its name is what ``kgagents eval --dataset`` takes."""
    DATASETS[spec.name] = spec


_PLUGINS_LOADED = False
#: Modules of this package that register datasets (each has ``register_datasets(register)``).
PLUGINS = ("kgagents.evals.colota", "kgagents.evals.grbench", "kgagents.evals.stark", "kgagents.evals.crag")


def load_plugins() -> None:
    """Let the dataset modules of this package register their datasets and scorers (once).

    :mod:`kgagents.evals.colota` (CR-LT-KGQA / CoLoTa) and :mod:`kgagents.evals.grbench` (GRBench) plug in through
    ``register_datasets(register)``, which calls ``register(DatasetSpec(...))`` for each of their datasets. The
    workflows' adapters are named by their specs (:mod:`kgagents.graphs.registry`), not registered here.
    """
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    for module in PLUGINS:
        if importlib.util.find_spec(module) is not None:
            register = getattr(importlib.import_module(module), "register_datasets", None)
            if callable(register):
                register(register_dataset)


def dataset_context(name: str) -> dict[str, Any]:
    """The context values the dataset ``name`` asks of a run (its :attr:`DatasetSpec.context`; none for a
    dataset that is not registered)."""
    load_plugins()
    spec = DATASETS.get(name)
    return dict(spec.context) if spec is not None else {}


def dataset_protocol(name: str, protocol: str) -> Protocol:
    """The evaluation protocol ``protocol`` of the dataset ``name``; a clear error when it has none such."""
    load_plugins()
    spec = DATASETS.get(name)
    if spec is None:
        raise DatasetError(f"unknown dataset {name!r}; available: {', '.join(sorted(DATASETS))}")
    if protocol not in spec.protocols:
        known = ", ".join(sorted(spec.protocols)) or "none"
        raise DatasetError(f"dataset {name!r} has no protocol {protocol!r} (its protocols: {known})")
    return spec.protocols[protocol]


def sample_items(items: list[Item], fraction: float, seed: int = 0) -> list[Item]:
    """A seeded random sample of ``fraction`` of the items (``round(fraction * n)``, at least one), in their
    dataset order: the same fraction and seed give the same items on every machine.

    The KGoT paper evaluates on "10% ... for budgetary reasons" of SimpleQA's 4,326 questions (433 tasks) without
    publishing which ones: ``fraction=0.1`` gives a sample of that size, not the authors' own.
    """
    if not 0 < fraction <= 1:
        raise DatasetError(f"a sample is a fraction of the items, above 0 and at most 1 (got {fraction})")
    if not items:
        return []
    k = max(1, round(fraction * len(items)))
    chosen = sorted(random.Random(seed).sample(range(len(items)), k))
    return [items[i] for i in chosen]


def load_dataset(name: str, path: str | Path | None, *, split: str | None = None, limit: int | None = None,
                 ids: list[str] | None = None, sample: float | None = None, sample_seed: int = 0) -> Dataset:
    """Load ``name`` from ``path``; ``ids`` keeps only the given items, ``sample`` a seeded random fraction of them
    (:func:`sample_items`), ``limit`` the first N of what is left."""
    load_plugins()
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; available: {', '.join(sorted(DATASETS))}")
    spec = DATASETS[name]
    split = split or spec.default_split
    if split not in spec.splits:
        raise DatasetError(f"dataset {name!r} has no split {split!r}; splits: {', '.join(spec.splits)}")
    if path is None:
        path = packaged_data(spec)
        if path is None:
            raise DatasetError(f"dataset {name!r} needs --data PATH. {spec.how_to_get}")
    path = Path(path).expanduser()
    if not path.exists():
        raise DatasetError(f"{name}: {path} does not exist. {spec.how_to_get}")
    items = spec.load(path, split)
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise DatasetError(f"{name}: duplicate item id {item.id!r} in {path}")
        seen.add(item.id)
    if ids:
        wanted = set(ids)
        items = [i for i in items if i.id in wanted]
    if sample is not None:
        items = sample_items(items, sample, sample_seed)
    if limit is not None:
        items = items[:limit]
    return Dataset(name=name, split=split, items=items, scorer=spec.scorer, group_label=spec.group_label)


def packaged_data(spec: DatasetSpec) -> Path | None:
    """Where a dataset's files ship with kgagents: ``spec.default_data``, else the ``DATA_DIR`` folder of the
    module that defines its loader (how :mod:`kgagents.evals.colota` ships CR-LT and CoLoTa); None when they don't
    ship."""
    if spec.default_data is not None:
        return Path(spec.default_data)
    module = sys.modules.get(getattr(spec.load, "__module__", "") or "")
    data = getattr(module, "DATA_DIR", None)
    return Path(data) if data is not None and Path(data).exists() else None


# ----------------------------------------------------------------------------------------------------------------
# GAIA
# ----------------------------------------------------------------------------------------------------------------

GAIA_HOW_TO = (
    "GAIA is gated: accept the terms at https://huggingface.co/datasets/gaia-benchmark/GAIA, then download it, "
    "e.g. `huggingface-cli download gaia-benchmark/GAIA --repo-type dataset --local-dir data/GAIA`, and pass "
    "--data data/GAIA (or its 2023/ or 2023/validation/ folder)."
)


def gaia_split_dir(path: Path, split: str) -> Path:
    """The folder holding ``metadata.jsonl``/``.parquet`` for ``split``, from the repo root, year or split dir."""
    for candidate in (path, path / split, path / "2023" / split):
        if (candidate / "metadata.jsonl").is_file() or (candidate / "metadata.parquet").is_file():
            return candidate
    raise DatasetError(f"gaia: no metadata.jsonl or metadata.parquet for split {split!r} under {path}. "
                       + GAIA_HOW_TO)


def _read_gaia_rows(folder: Path) -> list[dict[str, Any]]:
    jsonl = folder / "metadata.jsonl"
    if jsonl.is_file():
        return [row for _, row in json_lines(jsonl.read_text(encoding="utf-8").splitlines(), f"gaia: {jsonl}",
                                             DatasetError)]
    parquet = folder / "metadata.parquet"
    pa = require("pyarrow", "reading GAIA's metadata.parquet")
    import pyarrow.parquet as pq  # the eval extra: only for Parquet files

    try:
        return pq.read_table(parquet).to_pylist()  # plain Python values: None for a missing field, dicts for structs
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DatasetError(f"gaia: {parquet} is not a readable Parquet file ({type(exc).__name__}: {exc}); "
                           "download it again") from exc


def load_gaia(path: Path, split: str) -> list[Item]:
    """GAIA items: ``task_id``, ``Question``, ``Level``, ``Final answer`` and an optional attachment."""
    folder = gaia_split_dir(path, split)
    items = []
    for row in _read_gaia_rows(folder):
        try:
            task_id, question = str(row["task_id"]), str(row["Question"])
        except KeyError as exc:
            raise DatasetError(f"gaia: a record in {folder} lacks the field {exc}") from exc
        attachments = []
        file_name = row.get("file_name") or ""
        if isinstance(file_name, str) and file_name.strip():
            file_path = row.get("file_path") or ""
            candidates = [folder / file_name]
            if isinstance(file_path, str) and file_path:
                candidates += [folder / file_path, path / file_path, folder.parent.parent / file_path]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                raise DatasetError(f"gaia: the attachment {file_name!r} of task {task_id} is missing from {folder}. "
                                   "Download the whole dataset folder, not only the metadata.")
            attachments.append(str(found.resolve()))
        gold = row.get("Final answer")
        items.append(Item(id=task_id, question=question, gold=None if gold is None else str(gold),
                          attachments=attachments, group=f"Level {row.get('Level', '?')}",
                          meta={"annotator": row.get("Annotator Metadata")} if row.get("Annotator Metadata") else {}))
    return items


register_dataset(DatasetSpec(name="gaia", load=load_gaia, scorer="gaia", splits=("validation", "test"),
                             default_split="validation", group_label="Level", how_to_get=GAIA_HOW_TO))


# ----------------------------------------------------------------------------------------------------------------
# SimpleQA
# ----------------------------------------------------------------------------------------------------------------

SIMPLEQA_HOW_TO = ("Download the public CSV, "
                   "https://openaipublic.blob.core.windows.net/simple-evals/simple_qa_test_set.csv, "
                   "and pass --data simple_qa_test_set.csv.")


def _simpleqa_metadata(text: str) -> dict[str, Any]:
    if not text:
        return {}
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, dict):
            return value
    return {}


def load_simpleqa(path: Path, split: str) -> list[Item]:
    """SimpleQA items from the CSV; the id is the row number, the group the metadata's ``topic``."""
    if path.is_dir():
        path = path / "simple_qa_test_set.csv"
        if not path.is_file():
            raise DatasetError(f"simpleqa: no simple_qa_test_set.csv in {path.parent}. {SIMPLEQA_HOW_TO}")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = {"problem", "answer"} - set(reader.fieldnames or [])
            if missing:
                raise DatasetError(f"simpleqa: {path} lacks the column(s) {', '.join(sorted(missing))}; "
                                   f"expected metadata, problem, answer")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"simpleqa: cannot read {path}: {exc}") from exc
    items = []
    for index, row in enumerate(rows):
        meta = _simpleqa_metadata(row.get("metadata") or "")
        items.append(Item(id=str(index), question=row["problem"], gold=row["answer"],
                          group=str(meta.get("topic", "")), meta=meta))
    return items


register_dataset(DatasetSpec(name="simpleqa", load=load_simpleqa, scorer="simpleqa", splits=("test",),
                             default_split="test", group_label="Topic", how_to_get=SIMPLEQA_HOW_TO))
