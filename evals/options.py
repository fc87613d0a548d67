"""What defines an evaluation (:class:`EvalOptions`) and what a worker process asks of the item runner that
runs it (:class:`RunsItems`): the batch runner (:mod:`kgagents.evals.runner`) and its worker processes
(:mod:`kgagents.evals.processes`) both read them, and neither imports the other for them."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kgagents.evals.datasets import Item
from kgagents.evals.judges import Judge
from kgagents.nodes.budget import check_budget

CHECKPOINTS_FILE = "checkpoints.sqlite"


class RunsItems(Protocol):
    """What a worker process needs of an item runner (:class:`kgagents.evals.runner.ItemRunner`): open it once,
    then run (item, run) pairs, each to its record."""

    def opened(self) -> AbstractAsyncContextManager[Any]: ...

    async def run(self, item: Item, run: int) -> dict[str, Any]: ...


@dataclass
class EvalOptions:
    """Everything that defines an evaluation (picklable when the context is given as plain values)."""

    workflow: str
    out_dir: Path
    concurrency: int = 4
    runs: int = 1
    context_values: dict[str, Any] = field(default_factory=dict)
    """JSON values of the workflow's context (recorded in the manifest; what workers rebuild it from)."""
    context: Any = None
    """A ready context object (e.g. holding chat-model instances); used instead of ``context_values``."""
    preset: str | None = None
    """The name of the workflow's preset the context values came from (recorded in the manifest)."""
    seed: int | None = None
    """Base sampling seed: run ``r`` of every item gets ``seed + r`` as its context's ``seed`` (passed to the
    providers that take one, see :data:`kgagents.nodes.models.SEED_PARAMETERS`); ``None`` leaves the context's own."""
    grader_model: Any = None
    """Chat model (instance or ``provider:model``) of an LLM grader; default: the benchmark's own judge where its
    scorer names one (:data:`kgagents.evals.scorers.DEFAULT_GRADERS`), else the workflow's ``model``."""
    grader_base_url: str | None = None
    """The OpenAI-compatible server of the LLM grader (default: ``KGAGENTS_GRADER_BASE_URL``, else as
    :mod:`kgagents.evals.judges` says: never the run's server for another model than the run's)."""
    judge: Judge | None = None
    """The LLM grader worked out beforehand (:func:`kgagents.evals.judges.judge_of`), which then takes the place of
    :attr:`grader_model`, :attr:`grader_base_url` and the run's model: a re-scoring's, from the user's own flags and
    environment, never from the results folder it reads; ``None``: from these options (:func:`evaluation_judge`)."""
    retry_failed: bool = False
    progress: bool = True
    checkpointer: str | None = None
    """Checkpointer URL; default: ``checkpoints.sqlite`` in ``out_dir``."""
    processes: int = 1
    """Worker processes on this machine that share the ``concurrency`` items in flight
    (see kgagents.evals.processes)."""
    budget_usd: float | None = None
    """The evaluation's budget: once the items of this call (their runs and their graders) have cost this much,
    no further item starts (those in flight finish); ``None``: none. A run's own budget is the context's
    ``budget_usd`` (``--set budget_usd=...``)."""
    budget_tokens: int | None = None
    """As ``budget_usd``, in tokens (input plus output, runs and graders)."""
    worker_setup: Callable[[], Any] | None = None
    """Called once in every worker process before its first item (e.g. to register a tool the context names);
    a module-level function (or a ``functools.partial`` of one), so that it can be sent to the process."""

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.processes < 1:
            raise ValueError("processes must be at least 1")
        if self.runs < 1:
            raise ValueError("runs must be at least 1")
        check_budget(self.budget_usd, self.budget_tokens)
        if (self.budget_usd is not None or self.budget_tokens is not None) and self.processes > 1:
            raise ValueError("an evaluation budget is kept by one process: leave processes at 1")

    @property
    def checkpointer_url(self) -> str:
        return self.checkpointer or str(self.out_dir / CHECKPOINTS_FILE)
