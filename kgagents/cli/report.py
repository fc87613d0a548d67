"""Human-readable views of a run's state (``kgagents show``)."""

from __future__ import annotations

import json
from typing import Any

from kgagents.core.usage import entry_cost, format_cost, sum_costs, total_tokens
from kgagents.graphs import registry
from kgagents.tools.kg.base import empty_snapshot, render_snapshot


def _usage_lines(usage: dict[str, Any]) -> list[str]:
    """Calls, tokens and cost per model and in total; a model without a price shows its cost as unknown."""
    lines = ["Usage:"]
    if not usage:
        return lines + ["  (no LLM calls)"]
    for model, u in usage.items():
        audio = f", {u['audio_seconds']:.1f} s of audio" if u.get("audio_seconds") else ""
        lines.append(f"  {model}: {u['calls']} calls, {u['input_tokens']} in / {u['output_tokens']} out tokens"
                     f"{audio}, {format_cost(entry_cost(u), digits=6)}")
    t = total_tokens(usage)
    cost = sum_costs(entry_cost(u) for u in usage.values())
    lines.append(f"  total: {t['calls']} calls, {t['input_tokens']} in / {t['output_tokens']} out tokens, "
                 f"{format_cost(cost, digits=6, unit='model')}")
    return lines


def _failure_lines(failures: list[dict[str, Any]]) -> list[str]:
    """The model calls that failed for good, each with what the workflow did instead."""
    if not failures:
        return []
    lines = [f"Failures ({len(failures)} model call(s) failed for good; the run went on):"]
    for f in failures:
        lines.append(f"  [{f.get('node') or '?'}] {f.get('role') or '-'}, {f.get('kind', 'api')}: "
                     f"{str(f.get('error', '')).splitlines()[0][:200] if f.get('error') else ''}")
        lines.append(f"      then: {f.get('outcome', '')}")
    return lines


def format_kgot(state: dict[str, Any]) -> list[str]:
    lines = [f"Iterations: {state.get('iteration', 0)}", "", "Votes:"]
    for v in state.get("votes", []):
        lines.append(f"  [it {v['iteration']} #{v['sample']}] {v['query_type']}: {v['reason'][:160]}")
    lines += ["", "Tool calls:"]
    for c in state.get("tool_calls", []):
        flag = "ok" if c["ok"] else "FAILED"
        cached = " (cached)" if c.get("cached") else ""
        lines.append(f"  [it {c['iteration']}] {c['name']}({json.dumps(c['args'], ensure_ascii=False)[:160]}) "
                     f"{flag}{cached}, {c['attempts']} attempt(s): {c['output'][:200]!r}")
    lines += ["", "KG writes:"]
    for w in state.get("kg_writes", []):
        lines.append(f"  [it {w['iteration']}] {w['status']} after {w['attempts']} attempt(s) "
                     f"(tool call {w['tool_call_id']})")
        for err in w.get("errors", []):
            lines.append(f"      error: {err.splitlines()[0][:200] if err else ''}")
    if state.get("solve_attempts"):
        lines += ["", "Solve queries:"]
        for a in state["solve_attempts"]:
            what = "error: " + (a["error"] or "") if not a["ok"] else ("empty" if a["empty"] else "ok")
            lines.append(f"  {a['kind']}: {what[:200]}")
    if state.get("solve_operations"):
        lines += ["", "Solve operations:"]
        for op in state["solve_operations"]:
            votes = f" (votes {', '.join(map(str, op['votes']))})" if op.get("votes") else ""
            what = (op.get("query") or op.get("operation") or "").replace("\n", " ")[:120]
            outcome = "a partial solution" if op.get("partial_solution") else f"none: {op.get('error')}"
            lines.append(f"  [it {op['iteration']}] {op['kind']}{votes}: {what!r} -> {outcome[:200]}")
    lines += ["", "Partial solution:", f"  {state.get('partial_solution')}", "",
              f"Candidates: {state.get('candidates', [])}", "", "Final knowledge graph:",
              render_snapshot(state.get("kg") or empty_snapshot())]
    return lines


def _triple(t: dict[str, Any]) -> str:
    quals = ", ".join(f"{k}: {v}" for k, v in (t.get("qualifiers") or {}).items())
    return f"[{t['key']}] ({t['head']}, {t['relation']}, {t['tail']})" + (f" {{{quals}}}" if quals else "")


def format_ark(state: dict[str, Any]) -> list[str]:
    """ARK-V1: the graph, why the run ended, each reasoning step (anchor, relation, triples) and every attempt."""
    kg = state.get("kg_stats") or {}
    ref = state.get("graph_ref") or {}
    source = state.get("kg_file") or ref.get("name") or "inline edges"
    source += f" #{state['kg_id']}" if state.get("kg_id") else ""
    if ref.get("fingerprint"):
        source += f", fingerprint {ref['fingerprint']}"
    graph = (f"Knowledge graph: {kg.get('edges', '?')} edges, {kg.get('entities', '?')} entities, "
             f"{kg.get('heads', '?')} head entities, {kg.get('relations', '?')} relations ({source})")
    lines = [graph,
             f"Question type: {state.get('question_type', '?')}", f"Exit: {state.get('exit_reason', '(running)')}",
             f"Justification: {state.get('justification', '')}", "", "Reasoning steps:"]
    for s in state.get("steps", []):
        c = s.get("attempts", {})
        lines.append(f"  [{s['k']}] anchor \"{s['anchor']}\" -> relation \"{s['relation']}\" "
                     f"(attempts: anchor {c.get('anchor', 0)}, relation {c.get('relation', 0)}, "
                     f"reasoning {c.get('reasoning', 0)}); {len(s['retrieved'])} triple(s) retrieved, "
                     f"{len(s['selected'])} selected:")
        lines += [f"      {_triple(t)}" for t in s["selected"]]
        lines.append(f"      implication: {s['implication']}")
        lines.append(f"      continue: {'yes' if s['continue_exploration'] else 'no'}")
    lines += ["", "Attempts:"]
    for a in state.get("attempts", []):
        shown = a["candidate"] if a["candidate"] is not None else "(unparseable)"
        near = f"; nearest: {', '.join(a['alternatives'])}" if a.get("alternatives") else ""
        lines.append(f"  k={a['k']} {a['stage']} #{a['c']}: {shown!r} -> {a['outcome']}{near}")
    return lines


def format_fusion(state: dict[str, Any]) -> list[str]:
    lines = [f"Variants: {', '.join(state.get('variants') or [])}", "", "Answers per variant:"]
    for r in state.get("results") or []:
        lines.append(f"  {r['variant']}: {r.get('final_answer')!r}")
    lines += ["", "Tally:"]
    for answer, votes in (state.get("tally") or {}).items():
        lines.append(f"  {votes} × {answer!r}")
    lines += ["", "Each variant's KG: kgagents show THREAD --kg --snapshot N"]
    return lines


def format_grounded(state: dict[str, Any]) -> list[str]:
    """Grounded reasoning: the thought graph as a tree (merges under both parents), each thought's grounding, the
    evaluator's decisions and where the answer came from."""
    thoughts = state.get("thoughts") or {}
    ref = state.get("graph_ref") or {}
    lines = [f"Graph: {ref.get('name', '?')} (fingerprint {ref.get('fingerprint', '?')})",
             f"Exit: {state.get('exit_reason', '(running)')}; answer from state {state.get('best', '–')}", "",
             "Thought graph:"]
    children: dict[str, list[str]] = {}
    for t in thoughts.values():
        for parent in t.get("parents") or []:
            children.setdefault(parent, []).append(t["id"])
    finals = set(state.get("finals") or [])

    def show(node_id: str, indent: int, seen: set[str]) -> None:
        t = thoughts.get(node_id, {})
        mark = ("★ " if node_id == state.get("best") else "✓ " if node_id in finals else
                "+ " if t.get("kept") else "✗ " if t.get("error") else "- ")
        kind = " (merge of " + " + ".join(t.get("parents", [])) + ")" if t.get("kind") == "merge" else ""
        score = (f" [score {t['score']}, {t.get('votes', 0)} vote(s)]" if t.get("score") is not None
                 else f" [{t['votes']} vote(s)]" if t.get("votes") is not None else "")
        lines.append(f"{'  ' * indent}{mark}{node_id}{kind}{score}: {str(t.get('thought', ''))[:160]}")
        pad = "  " * (indent + 2)
        for a in t.get("actions") or []:
            args = ", ".join(str(v) for v in (a.get("args") or {}).values())
            lines.append(f"{pad}{a.get('name')}[{args}] → {str(a.get('observation', ''))[:200]}")
        if t.get("observation") and not t.get("actions"):
            lines.append(f"{pad}{str(t['observation'])[:200]}")
        for triple in t.get("triples") or []:
            lines.append(f"{pad}{' -> '.join(triple)}")
        for attribute in t.get("attributes") or []:
            lines.append(f"{pad}{attribute[:200]}")
        if t.get("answer"):
            lines.append(f"{pad}Finish: {t['answer']}")
        if t.get("error"):
            lines.append(f"{pad}failed: {str(t['error'])[:200]}")
        if node_id in seen:
            return
        seen.add(node_id)
        for child in sorted(children.get(node_id, []), key=lambda c: (thoughts[c].get("kind") == "merge", c)):
            show(child, indent + 1, seen)

    if "t0" in thoughts:
        show("t0", 0, set())
    lines += ["", "(★ the answer's state, ✓ final, + kept, - pruned, ✗ failed)", "", "Evaluations:"]
    for s in state.get("selections") or []:
        lines.append(f"  depth {s['depth']} ({s['evaluator']}): kept {', '.join(s['kept']) or '(none)'} of "
                     f"{len(s['candidates'])}; {str(s.get('reason', ''))[:240]}")
    return lines


def format_agent_g(state: dict[str, Any]) -> list[str]:
    """Agent-G: every iteration's action, references, answer, the validator's verdict and the feedback."""
    from kgagents.nodes.agent_g import Action, describe_action

    lines = [f"Exit: {state.get('exit_reason', '(running)')}"]
    if state.get("ranked_ids"):
        more = " …" if len(state["ranked_ids"]) > 20 else ""
        lines.append(f"Ranking: {', '.join(state['ranked_ids'][:20])}{more}")
    for it in state.get("iterations") or []:
        retrieval = it.get("retrieval") or {}
        lines += ["", f"Iteration {it.get('t')}:", f"  action: {describe_action(it.get('action') or Action())}",
                  f"  retrieval ({retrieval.get('module', '?')}): {len(retrieval.get('references') or [])} "
                  f"reference(s)" + (f"; linked {retrieval['linked']}" if retrieval.get("linked") else "")]
        lines += [f"    note: {note}" for note in retrieval.get("notes") or []]
        for ref in (retrieval.get("references") or [])[:5]:
            lines.append(f"    [{ref['kind']} {ref['id']}] {str(ref['text'])[:160]!r}")
        if it.get("answer"):
            lines.append(f"  answer: {it['answer']}")
        verdict = "accepted" if it.get("accepted") else "rejected"
        lines.append(f"  validator: {verdict} ({str(it.get('validator_reply', ''))[:80]!r})")
        if it.get("feedback"):
            lines.append(f"  feedback [{it.get('error_type')}]: {it['feedback']}")
    return lines


def format_kg_rag(state: dict[str, Any]) -> list[str]:
    return [f"Retrieved nodes: {', '.join(state.get('retrieved') or []) or '(none)'}", "", "Context:",
            str(state.get("context", ""))[:4000]]


def format_run(workflow: str, thread_id: str, state: dict[str, Any], next_nodes: tuple[str, ...] = ()) -> str:
    status = "finished" if not next_nodes else f"interrupted (next: {', '.join(next_nodes)})"
    lines = [f"Thread {thread_id} ({workflow}), {status}", f"Question: {state.get('question', '')}",
             f"Answer: {state.get('final_answer', '(none yet)')}", ""]
    if state.get("budget_stop"):
        lines[-1:] = [f"Ended at its budget: {state['budget_stop']}", ""]
    formatter = registry.formatter_of(workflow) if workflow in registry.SPECS else None
    if formatter:
        lines += formatter(state)
    failures = _failure_lines(state.get("failures") or [])
    if failures:
        lines += ["", *failures]
    lines += [""] + _usage_lines(state.get("usage") or {})
    return "\n".join(lines)
