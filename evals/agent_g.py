"""How the evaluation runner talks to Agent-G and its baselines (paper 004): the iterations a run took, and
the gold an oracle ablation reads (Tables 6 and 7's "Oracle" rows).

Every item's input carries its gold in ``oracle`` (STaRK: the answer ids; CRAG: the answer, the alternative
answers and the question's labels). Agent-G reads it only when ``oracle_validator`` or ``oracle_commentor`` is
on; otherwise its first node drops it, so no later node, prompt or checkpoint holds it. """

from __future__ import annotations

import json
from typing import Any

from kgagents.core.nofollow import write_file
from kgagents.evals.runner import Adapter, ItemRunner, default_input, evaluate, thread_id_for
from kgagents.nodes.retriever_bank import Retrieval, describe_retrieval

#: The labels of a CRAG record an oracle commentor compares the agent's decisions with.
CRAG_LABELS = ("question_type", "static_or_dynamic", "domain", "popularity")


def oracle_of(item: Any) -> dict[str, Any]:
    """The gold of an item as the oracle ablations read it."""
    meta = getattr(item, "meta", None) or {}
    if "answer_ids" in meta:
        return {"answer_ids": [str(a) for a in meta["answer_ids"]]}
    oracle: dict[str, Any] = {"answer": str(item.gold), "alternative_answers": list(meta.get("alternative_answers")
                                                                                     or [])}
    oracle.update({k: meta[k] for k in CRAG_LABELS if k in meta})
    if item.group and "domain" not in oracle:
        oracle["domain"] = item.group
    return oracle


def agent_g_input(item: Any) -> dict[str, Any]:
    """The runner's default input (question and the item's inputs) plus the item's gold for the oracles."""
    return {**default_input(item), "oracle": oracle_of(item)}


def agent_g_stats(state: dict[str, Any]) -> dict[str, Any]:
    """Iterations of Algorithm 1 a run took (no tool calls: the retriever bank is not a tool)."""
    return {"iterations": int(state.get("t") or 0), "tool_calls": 0}


def agent_g_adapter() -> Adapter:
    """How the evaluation runner talks to Agent-G and its baselines (named by their workflow specs): the gold
    for the oracles in every input, the iterations of Algorithm 1."""
    return Adapter(to_input=agent_g_input, stats=agent_g_stats)


# --------------------------------------------------------------------------------------------------------------
# In-context examples collected from a training split and verified against its gold (paper 004, §2.3, A.2.2)
# --------------------------------------------------------------------------------------------------------------
#: The split the paper collects examples from: STaRK's training split, CRAG's validation split.
EXAMPLE_SPLITS = {"crag": "validation"}
AGENT_FILE, COMMENTOR_FILE, RECORDS_FILE = "agent_examples.txt", "commentor_examples.txt", "examples.jsonl"


def example_action(action: dict[str, Any], task: str) -> str:
    """An action as the built-in agent examples write it."""
    entities = ", ".join(f"{e['name']} ({e.get('type') or '?'})" for e in action.get("entities") or []) or "(none)"
    parts = []
    if task == "generation":
        labels = (("domain", "domain"), ("type", "question_type"), ("dynamism", "dynamism"))
        parts = [f"{label} {action[key]}" for label, key in labels if action.get(key)]
    parts += [f"entities: {entities}", f"relations: {', '.join(action.get('relations') or []) or '(none)'}",
              f"source: {'knowledge graph' if action.get('module') == 'graph' else 'text documents'}"]
    return "; ".join(parts)


def _quality(iteration: dict[str, Any], oracle: dict[str, Any], task: str) -> float:
    """How good an iteration's output is against the gold: MRR over its ranking (STaRK), 1 for an accepted
    answer (CRAG: the oracle validator accepted it)."""
    if task == "retrieval":
        gold = {str(a) for a in oracle.get("answer_ids") or []}
        ranked = [str(r) for r in iteration.get("ranked_ids") or []]
        return next((1.0 / (n + 1) for n, r in enumerate(ranked) if r in gold), 0.0)
    return 1.0 if iteration.get("accepted") else 0.0


def verified_examples(question: str, state: dict[str, Any], oracle: dict[str, Any], task: str
                      ) -> tuple[list[str], list[str]]:
    """The agent and commentor examples one oracle run yields: each action whose output the gold verifies
    (accepted), and each (rejected action, the oracle's feedback) pair whose next action did better against
    the gold — the paper's "successful experiences"."""
    iterations = list(state.get("iterations") or [])
    agent, commentor = [], []
    for n, iteration in enumerate(iterations):
        action = iteration.get("action") or {}
        if iteration.get("accepted"):
            agent.append(f"Question: {question}\nAction: {example_action(action, task)}")
        elif iteration.get("error_type") and n + 1 < len(iterations) and \
                _quality(iterations[n + 1], oracle, task) > _quality(iteration, oracle, task):
            summary = describe_retrieval(iteration.get("retrieval") or Retrieval()).replace("\n", "; ")
            commentor.append(f"Question: {question}\nAction: {example_action(action, task)}\n"
                             f"Retrieval: {summary}\nFeedback: {iteration['error_type']}")
    return agent, commentor


async def collect_examples(options: Any, dataset: Any) -> dict[str, Any]:
    """Run Agent-G with the oracle critic over ``dataset`` (resumable: the evaluation runner, its checkpoints
    in ``options.out_dir``), then write the verified agent and commentor examples of every run into
    ``agent_examples.txt`` and ``commentor_examples.txt`` (blank-line separated, as the in-context example
    settings read them) and their provenance into ``examples.jsonl``."""
    result = await evaluate(options, dataset)
    runner = ItemRunner(options, dataset.name, None)  # type: ignore[arg-type]
    task = getattr(runner.base_context, "task", "retrieval")
    agent, commentor, records = [], [], []
    async with runner.opened():
        for item in dataset.items:
            config = {"configurable": {"thread_id": thread_id_for(dataset.name, item.id, 0)}}
            state = dict((await runner.graph.aget_state(config)).values)
            if not state.get("iterations"):
                continue
            found = verified_examples(item.question, state, oracle_of(item), task)
            agent += found[0]
            commentor += found[1]
            records.append({"id": item.id, "question": item.question, "agent_examples": len(found[0]),
                            "commentor_examples": len(found[1]), "iterations": len(state["iterations"])})
    out = options.out_dir  # a results folder: its files are written as files of their own, never through links
    write_file(out / AGENT_FILE, "\n\n".join(agent) + "\n")
    write_file(out / COMMENTOR_FILE, "\n\n".join(commentor) + "\n")
    write_file(out / RECORDS_FILE, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
    return {"questions": len(dataset.items), "runs": len(result.records), "failed": result.failed,
            "agent_examples": len(agent), "commentor_examples": len(commentor), "agent_file": out / AGENT_FILE,
            "commentor_file": out / COMMENTOR_FILE}
