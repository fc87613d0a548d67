"""Reports over one or several result directories: Markdown tables and PNG plots.

- a summary per directory: solved tasks, accuracy, cost, cost per solved task, tokens, time, errors;
- accuracy per level / domain, side by side;
- the dataset's own metrics (SimpleQA: correct, not attempted, incorrect, correct given attempted, F-score);
- the runtime breakdown by node;
- fusion (KGoT §5.1, Figures 3 and 13, Table 1): the live combiner's accuracy beside the *ideal* fusion (a task
  solved when any variant solved it) of every combination of the variants, overall and per level; with
  ``ideal_fusion=True``, also the ideal fusion of the directories themselves (separate runs of the same items,
  as the paper simulates fusion from single runs);
- ``pareto.png``: solved tasks against total cost with the Pareto front (the KGoT paper's Figure 11), ideal
  fusions included;
- ``runtime_by_node.png``: where the time goes, per directory.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgagents.core.extras import MissingExtra, installed
from kgagents.core.nofollow import replacing, write_file
from kgagents.core.printable import printable
from kgagents.core.usage import CostTotal, format_cost, sum_costs
from kgagents.evals.datasets import load_plugins
from kgagents.evals.grbench import difficulty_table, table1
from kgagents.evals.runner import read_manifest, read_results
from kgagents.evals.scorers import ideal_correct, make_scorer


@dataclass
class RunSet:
    """One result directory."""

    path: Path
    label: str
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    given_label: str | None = None
    """The label the user gave it (``report --label``), as given: the GRBench tables name its row so, and one
    label given to an evaluation's folders (one per domain) is one row (:attr:`label` is then made unique per
    folder for the other tables)."""

    @property
    def solved(self) -> int:
        return sum(1 for r in self.records if r.get("correct") is True)

    @property
    def cost_total(self) -> CostTotal:
        """The items' cost, with how many are unknown (a model without a price)."""
        return sum_costs(r.get("cost_usd", 0.0) for r in self.records)

    @property
    def cost(self) -> float:
        """The known part of the cost (what the plots place; :attr:`cost_total` says what is unknown)."""
        return self.cost_total.known_usd

    @property
    def variants(self) -> list[str]:
        """The variants of a fusion run, in their order (none for other workflows)."""
        return list(dict.fromkeys(v for r in self.records for v in r.get("variants") or {}))


def load_runset(path: str | Path, label: str | None = None) -> RunSet:
    path = Path(path)
    manifest = read_manifest(path)
    if manifest is None:
        raise FileNotFoundError(f"{path} is not an evaluation directory (no manifest.json)")
    records = read_results(path)
    return RunSet(path=path, label=label or default_label(path, manifest), manifest=manifest, records=records,
                  given_label=label or None)


def default_label(path: Path, manifest: dict[str, Any]) -> str:
    roles = {k: v for k, v in (manifest.get("models") or {}).items() if k != "base_url"}
    model = (manifest.get("context") or {}).get("model") or roles.get("graph_executor") or \
        next(iter(roles.values()), None)
    base = manifest.get("workflow", "?")
    return f"{base} ({model})" if model else f"{base} [{path.name}]"


def _unique_labels(runsets: list[RunSet]) -> None:
    seen: dict[str, int] = defaultdict(int)
    for rs in runsets:
        seen[rs.label] += 1
    for rs in runsets:
        if seen[rs.label] > 1:
            rs.label = f"{rs.label} [{rs.path.name}]"


def _fmt_money(value: float | CostTotal | None) -> str:
    return format_cost(value)


def _cell(value: Any) -> str:
    """A table cell: a value on one line (:func:`kgagents.core.printable.printable`), its ``|`` escaped."""
    return printable(str(value)).replace("|", "\\|")


def _table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def graded(records: Sequence[dict[str, Any]]) -> bool:
    """Whether any finished item got a verdict (an evaluation without its LLM grader has none: not graded,
    never 0 %)."""
    return any(r.get("correct") is not None for r in records if not r.get("error"))


def degraded(records: Sequence[dict[str, Any]]) -> str:
    """How many items finished with model calls that failed for good, and the failures by kind:
    ``2 (api 3, parse 1)``; ``0`` when none did."""
    items = [r for r in records if not r.get("error") and (r.get("failures") or {}).get("count")]
    if not items:
        return "0"
    kinds: dict[str, int] = defaultdict(int)
    for r in items:
        for kind, n in (r["failures"].get("kinds") or {}).items():
            kinds[kind] += int(n)
    return f"{len(items)} ({', '.join(f'{kind} {n}' for kind, n in sorted(kinds.items()))})"


def summary_rows(runsets: list[RunSet]) -> list[list[Any]]:
    rows = []
    for rs in runsets:
        n = len(rs.records)
        solved = rs.solved
        wall = [float(r.get("wall_s") or 0.0) for r in rs.records]
        tokens_in = sum(int((r.get("tokens") or {}).get("input_tokens", 0)) for r in rs.records)
        tokens_out = sum(int((r.get("tokens") or {}).get("output_tokens", 0)) for r in rs.records)
        unmeasured = sum(int((r.get("tokens") or {}).get("unmeasured_calls", 0)) for r in rs.records)
        tokens = f"{tokens_in:,} / {tokens_out:,}" + (f" + {unmeasured} calls unknown" if unmeasured else "")
        grader = sum_costs(r.get("grader_cost_usd", 0.0) for r in rs.records)
        cost = rs.cost_total
        per_solved = _fmt_money(None if cost.unknown else cost.known_usd / solved) if solved else "–"
        scored = graded(rs.records)
        accuracy = (f"{solved / n:.1%}" if scored else "not graded") if n else "–"
        rows.append([rs.label, rs.manifest.get("dataset", "?"), n, solved if scored else "–", accuracy,
                     _fmt_money(cost), per_solved, tokens,
                     f"{statistics.fmean(wall):.1f}" if wall else "–", f"{sum(wall):.0f}",
                     sum(1 for r in rs.records if r.get("error")), degraded(rs.records), _fmt_money(grader)])
    return rows


def settings_rows(runsets: list[RunSet]) -> list[list[Any]]:
    """What each directory ran with: its workflow, models per role, preset, context values, grader, seed,
    data."""
    rows = []
    for rs in runsets:
        m = rs.manifest
        models = dict(m.get("models") or {})
        base_url = models.pop("base_url", None)
        names = set(models.values())
        shown = (str(next(iter(names))) if len(names) == 1 else
                 ", ".join(f"{role}: {name}" for role, name in models.items())) if models else "–"
        if base_url:
            shown += f" at {base_url}"
        context = ", ".join(f"{k}={v}" for k, v in sorted((m.get("context") or {}).items())
                            if k not in ("model", "base_url", *(f"{role}_model" for role in models)))
        rows.append([rs.label, m.get("workflow", "?"), shown, m.get("preset") or "–", context or "–",
                     m.get("grader_model") or "–", "–" if m.get("seed") is None else m.get("seed"),
                     m.get("runs", 1), m.get("data") or "–"])
    return rows


def per_run_rows(runsets: list[RunSet]) -> list[list[Any]]:
    """Accuracy per repetition (``--runs R``), with mean and standard deviation."""
    rows = []
    for rs in runsets:
        by_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in rs.records:
            by_run[int(r.get("run", 0))].append(r)
        if len(by_run) < 2:
            continue
        accs = [sum(1 for r in recs if r.get("correct") is True) / len(recs) for _, recs in sorted(by_run.items())]
        rows.append([rs.label, len(accs), ", ".join(f"{a:.1%}" for a in accs), f"{statistics.fmean(accs):.1%}",
                     f"{statistics.stdev(accs):.1%}"])
    return rows


def group_table(runsets: list[RunSet]) -> list[str]:
    groups = sorted({str(r.get("group") or "–") for rs in runsets for r in rs.records})
    label = runsets[0].manifest.get("group_label", "Group") if runsets else "Group"
    header = [label] + [rs.label for rs in runsets]
    rows = []
    for g in groups:
        row: list[Any] = [g]
        for rs in runsets:
            recs = [r for r in rs.records if str(r.get("group") or "–") == g]
            solved = sum(1 for r in recs if r.get("correct") is True)
            cost = sum_costs(r.get("cost_usd", 0.0) for r in recs)
            row.append(f"{solved}/{len(recs)} ({solved / len(recs):.1%}), {_fmt_money(cost)}" if recs else "–")
        rows.append(row)
    return _table(header, rows)


def metric_table(runsets: list[RunSet]) -> list[str]:
    """The dataset's own metrics (from its scorer), one column per directory."""
    load_plugins()
    metrics = []
    for rs in runsets:
        scorer = make_scorer(rs.manifest.get("scorer", "gaia"))
        metrics.append(scorer.metrics(rs.records))
    keys = [k for k in metrics[0] if k != "n"] if metrics else []
    for m in metrics[1:]:
        keys += [k for k in m if k not in keys and k != "n"]
    rows = []
    for k in keys:
        row: list[Any] = [k.replace("_", " ")]
        for m in metrics:
            v = m.get(k)
            row.append(f"{v:.3f}" if isinstance(v, float) else ("–" if v is None else v))
        rows.append(row)
    return _table(["metric"] + [rs.label for rs in runsets], rows)


def _solved(records: Sequence[dict[str, Any]], solved: Any) -> str:
    n = len(records)
    count = sum(1 for r in records if solved(r))
    return f"{count}/{n} ({count / n:.1%})" if n else "–"


def variant_combinations(variants: Sequence[str]) -> list[tuple[str, ...]]:
    """Every combination of the variants, largest first (all of them, then each leave-one-out, ..., singles)."""
    return [c for size in range(len(variants), 0, -1) for c in itertools.combinations(variants, size)]


def fusion_tables(runsets: list[RunSet]) -> list[str]:
    """The live combiner beside the ideal fusion of each combination of variants (Figure 13), and per level
    (Table 1's fusion row); empty when no directory is a fusion run."""
    fused = [rs for rs in runsets if rs.variants]
    if not fused:
        return []
    rows: list[list[Any]] = [["majority vote (the run's answer)"] + [_solved(rs.records, lambda r: r.get("correct")
                                                                          is True) for rs in fused]]
    combos = list(dict.fromkeys(c for rs in fused for c in variant_combinations(rs.variants)))
    for combo in combos:
        name = ("ideal fusion: " if len(combo) > 1 else "variant alone: ") + " + ".join(combo)
        rows.append([name] + [_solved(rs.records, lambda r, c=combo: ideal_correct(r, c))
                              if set(combo) <= set(rs.variants) else "–" for rs in fused])
    lines = _table(["answer"] + [rs.label for rs in fused], rows)
    groups = sorted({str(r.get("group") or "–") for rs in fused for r in rs.records})
    label = fused[0].manifest.get("group_label", "Group")
    per_group = []
    for g in groups:
        row: list[Any] = [g]
        for rs in fused:
            recs = [r for r in rs.records if str(r.get("group") or "–") == g]
            row += [_solved(recs, lambda r: r.get("correct") is True), _solved(recs, ideal_correct)]
        per_group.append(row)
    header = [label] + [f"{rs.label}: {kind}" for rs in fused for kind in ("majority", "ideal")]
    return lines + ["", f"Per {label.lower()}:", ""] + _table(header, per_group)


def ideal_across(runsets: list[RunSet]) -> list[str]:
    """The ideal fusion of the directories (KGoT §5: fusion simulated from single runs): an item (id, run) counts
    as solved when any directory solved it; its cost is the sum of the directories' costs."""
    keyed = [{(str(r.get("id")), int(r.get("run", 0))): r for r in rs.records} for rs in runsets]
    common = sorted(set.intersection(*(set(k) for k in keyed))) if keyed else []
    rows = []
    for size in range(len(runsets), 1, -1):
        for combo in itertools.combinations(range(len(runsets)), size):
            solved = sum(1 for key in common if any(keyed[i][key].get("correct") is True for i in combo))
            cost = sum_costs(keyed[i][key].get("cost_usd", 0.0) for key in common for i in combo)
            n = len(common)
            per_solved = _fmt_money(None if cost.unknown else cost.known_usd / solved) if solved else "–"
            rows.append([" + ".join(runsets[i].label for i in combo), n, solved, f"{solved / n:.1%}" if n else "–",
                         _fmt_money(cost), per_solved])
    return _table(["ideal fusion of", "items in all", "solved", "accuracy", "cost", "cost / solved"], rows)


def node_times(rs: RunSet) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for r in rs.records:
        for node, seconds in (r.get("node_s") or {}).items():
            totals[node] += float(seconds)
    return dict(totals)


def runtime_table(runsets: list[RunSet]) -> list[str]:
    nodes: list[str] = []
    per = [node_times(rs) for rs in runsets]
    for t in per:
        nodes += [n for n in sorted(t, key=lambda k: -t[k]) if n not in nodes]
    rows = []
    for node in nodes:
        row: list[Any] = [node]
        for t in per:
            total = sum(t.values()) or 1.0
            row.append(f"{t.get(node, 0.0):.1f} s ({t.get(node, 0.0) / total:.0%})" if node in t else "–")
        rows.append(row)
    return _table(["node (summed task time)"] + [rs.label for rs in runsets], rows)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats (cheaper or equal cost with more or equal solved)."""
    front = []
    for i, (ci, si) in enumerate(points):
        dominated = any((cj <= ci and sj >= si) and (cj < ci or sj > si) for j, (cj, sj) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


@dataclass
class ParetoPoint:
    """One point of the solved-vs-cost plot: ``cost`` is None when no part of it is known (drawn apart, in a
    "cost unknown" column, never at $0); ``partial`` when only part is known (drawn at the known part, a lower
    bound, and said so in its label)."""

    label: str
    cost: float | None
    solved: int
    partial: bool = False


def pareto_points(runsets: Sequence[RunSet]) -> list[ParetoPoint]:
    """The plot's points: each directory, and each fusion run's ideal fusion (it costs what the run cost)."""
    points = []
    for rs in runsets:
        total = rs.cost_total
        known = total.known_usd if (total.unknown == 0 or total.known_usd > 0) else None
        partial = bool(total.unknown) and known is not None
        suffix = " (cost partly unknown: at least this)" if partial else ""
        points.append(ParetoPoint(rs.label + suffix, known, rs.solved, partial))
        if rs.variants:
            points.append(ParetoPoint(f"{rs.label} (ideal fusion){suffix}", known,
                                      sum(ideal_correct(r) for r in rs.records), partial))
    return points


def pareto_plots(runsets: Sequence[RunSet], out_dir: Path) -> list[Path]:
    """One solved-vs-cost plot per dataset (``pareto.png`` when the report has one dataset, else
    ``pareto-<dataset>.png`` each): tasks solved on different datasets are not one scale."""
    by_dataset: dict[str, list[RunSet]] = {}
    for rs in runsets:
        by_dataset.setdefault(str(rs.manifest.get("dataset", "?")), []).append(rs)
    if len(by_dataset) == 1:
        return [plot_pareto(runsets, out_dir / "pareto.png")]
    return [plot_pareto(group, out_dir / f"pareto-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png")
            for name, group in sorted(by_dataset.items())]


def plot_pareto(runsets: Sequence[RunSet], path: Path) -> Path:
    """Solved tasks against total cost with the Pareto front of the priced points (KGoT's Figure 11); points
    whose cost is unknown stand in their own column at the right."""
    import matplotlib  # the eval extra: only when plots are drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # the eval extra: only when plots are drawn
    from matplotlib.ticker import MaxNLocator  # the eval extra: only when plots are drawn

    points = pareto_points(runsets)
    priced = [(p, p.cost) for p in points if p.cost is not None]
    front = {id(priced[i][0]) for i in pareto_front([(cost, float(p.solved)) for p, cost in priced])}
    top = max((cost for _, cost in priced), default=0.0) or 1.0
    unknown_x = top * 1.25
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p in points:
        x = p.cost if p.cost is not None else unknown_x
        ax.scatter([x], [p.solved], s=60, zorder=3, marker="o" if id(p) in front else "x")
        ax.annotate(p.label, (x, p.solved), textcoords="offset points", xytext=(6, 4), fontsize=8)
    line = sorted(((p, cost) for p, cost in priced if id(p) in front), key=lambda point: point[1])
    if len(line) > 1:
        ax.plot([cost for _, cost in line], [p.solved for p, _ in line], "--", color="grey", zorder=2,
                label="Pareto front")
        ax.legend(loc="lower right", fontsize=8)
    if len(priced) < len(points):
        ax.axvline(top * 1.12, color="grey", linestyle=":", linewidth=1)
        ax.text(unknown_x, 0.02, "cost unknown", transform=ax.get_xaxis_transform(), ha="center", fontsize=8,
                color="dimgrey")
        ax.set_xlim(left=0, right=top * 1.4)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("total cost (USD)")
    ax.set_ylabel("solved tasks")
    datasets = sorted({rs.manifest.get("dataset", "?") for rs in runsets})
    ax.set_title(f"Solved tasks vs. cost ({', '.join(datasets)})")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    with replacing(path) as out:  # the folder may be someone else's: never through a link there
        fig.savefig(out, dpi=120, format="png")
    plt.close(fig)
    return path


def plot_runtime(runsets: list[RunSet], path: Path) -> Path:
    import matplotlib  # the eval extra: only when plots are drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # the eval extra: only when plots are drawn

    per = [node_times(rs) for rs in runsets]
    nodes: list[str] = []
    for t in per:
        nodes += [n for n in sorted(t, key=lambda k: -t[k]) if n not in nodes]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(runsets) + 2))
    left = [0.0] * len(runsets)
    cmap = plt.get_cmap("tab20")
    for k, node in enumerate(nodes):
        widths = [t.get(node, 0.0) for t in per]
        ax.barh([rs.label for rs in runsets], widths, left=left, label=node, color=cmap(k % 20))
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("summed node task time (s)")
    ax.set_title("Runtime by node")
    if nodes:
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    with replacing(path) as out:  # the folder may be someone else's: never through a link there
        fig.savefig(out, dpi=120, bbox_inches="tight", format="png")
    plt.close(fig)
    return path


def build_report(dirs: Sequence[str | Path], out: str | Path | None = None, labels: Sequence[str] | None = None,
                 plots: bool = True, ideal_fusion: bool = False) -> Path:
    """Write ``report.md`` (and the plots) comparing ``dirs`` into ``out`` (default: the first directory);
    ``ideal_fusion``: also the ideal fusion of the directories (runs of the same items)."""
    if not dirs:
        raise ValueError("name at least one result directory")
    runsets = [load_runset(d, labels[i] if labels and i < len(labels) else None) for i, d in enumerate(dirs)]
    _unique_labels(runsets)
    out_dir = Path(out) if out else runsets[0].path
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# Evaluation report", ""]
    lines += _table(["run", "dataset", "items", "solved", "accuracy", "cost", "cost / solved", "tokens in / out",
                     "mean wall s", "total wall s", "errors", "degraded", "grader cost"],
                    summary_rows(runsets))
    lines += ["", ("An error is an item whose run failed (it is not scored; `kgagents eval ... "
                   "--retry-failed` runs it again); a degraded item finished with model calls that failed "
                   "for good, which its workflow went on without (by kind: `api` kept failing, `parse` never "
                   "fit the schema).")]
    lines += ["", "## Settings", ""]
    lines += _table(["run", "workflow", "models", "preset", "context", "grader", "seed", "runs", "data"],
                    settings_rows(runsets))
    per_run = per_run_rows(runsets)
    if per_run:
        lines += ["", "## Repetitions", ""]
        lines += _table(["run", "repetitions", "accuracy per repetition", "mean", "std"], per_run)
    label = runsets[0].manifest.get("group_label", "Group")
    lines += ["", f"## Accuracy and cost per {label.lower()}", ""] + group_table(runsets)
    lines += ["", "## Metrics", ""] + metric_table(runsets)
    fusion = fusion_tables(runsets)
    if fusion:
        lines += ["", "## Fusion: the majority vote and the ideal fusion (KGoT §5.1, Figure 13)", "",
                  "A task counts as solved by an ideal fusion when any of its variants solved it.", ""] + fusion
    if ideal_fusion and len(runsets) > 1:
        lines += ["", "## Ideal fusion of the directories (KGoT §5: fusion simulated from single runs)", ""]
        lines += ideal_across(runsets)

    grbench = table1(runsets)
    if grbench:
        lines += ["", "## GRBench: Rouge-L (GPT4Score) per method and domain, as the paper's Table 1", ""] + grbench
    by_difficulty = difficulty_table(runsets)
    if by_difficulty:
        title = ("## GRBench by difficulty: Rouge-L (GPT4Score) on easy, medium and hard questions, "
                 "as the paper's Figure 14")
        lines += ["", title, ""] + by_difficulty
    lines += ["", "## Runtime by node", ""] + runtime_table(runsets)
    if plots and not installed("matplotlib"):
        lines += ["", f"(No plots: {MissingExtra('matplotlib', 'the plots')})"]
    elif plots:
        for plot in pareto_plots(runsets, out_dir):
            lines += ["", f"![solved vs cost]({plot.name})"]
        plot_runtime(runsets, out_dir / "runtime_by_node.png")
        lines += ["", "![runtime by node](runtime_by_node.png)"]
    lines += ["", ("Cost is the workflow's own LLM usage (prices from `kgagents.core.usage`); an LLM grader's "
                   "cost is listed apart. A model without a price makes a cost unknown, never $0: totals then say "
                   "how many items are unknown; a plot places a directory whose cost is partly known at its known "
                   "part (a lower bound, said in its label) and one whose cost is wholly unknown in a 'cost "
                   "unknown' column (one plot per dataset). Node time sums each node task's time, so concurrent "
                   "tasks add up.")]
    # every value of the folders is data: each of the report's lines stays one line, and the report is a file of
    # its own, never written through a link the folder carries (kgagents.core.nofollow)
    return write_file(out_dir / "report.md", "\n".join(printable(line) for line in lines) + "\n")
