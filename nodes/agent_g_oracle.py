"""The oracle critic of Agent-G's ablations (paper 004, §4.3, Tables 6 and 7: "The oracle has access to the
ground truth, which gives the optimal judgement on the correctness of the output and the error type of the
action"), read from the gold an evaluation hands over in the input's ``oracle`` field.

The paper does not say how its oracle decides; the rules here are this project's, written from Table 3's error
types:

- **Validator.** STaRK: the ranking is correct when its first id is an answer (Hit@1). CRAG: the answer is
  correct when CRAG's rules say so against the answer or an alternative answer ("i don't know" is not correct;
  an exact lower-case match is; "invalid" in both is) and otherwise when the paper's evaluator prompt, asked
  with the run's model, says "accurate".
- **Commentor.** STaRK: the text module's ranking → incorrect document; the graph module with two or more
  entities and no intersection → no intersection; with an intersection that holds no answer → incorrect
  intersection; with one entity whose ego-graph reaches an answer (not first) → missing entity; otherwise →
  incorrect entity/relation. CRAG: the first of the question's type, dynamism and domain that the action got
  wrong (CRAG's labels; its domain "open" is the paper's "encyclopedia"); else, for a question whose answer is
  in CRAG's knowledge graphs (a popularity label) read from web pages, or one answered from web pages read
  from the graph module → incorrect retrieval module; else incorrect entity and relation (graph module) or
  incorrect retrieval module (the next batch of pages). """

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kgagents.prompts import agent_g as P

IDK = "i don't know"


def _label(value: Any) -> str:
    """A CRAG label as the agent's choices spell it (``multi-hop`` → ``multi_hop``, ``open`` → ``encyclopedia``)."""
    text = re.sub(r"[\s-]+", "_", str(value or "").strip().lower())
    return "encyclopedia" if text == "open" else text


def ranking_is_correct(ranked: Sequence[str], oracle: Mapping[str, Any]) -> bool:
    """STaRK: the first ranked id is an answer."""
    gold = {str(a) for a in oracle.get("answer_ids") or []}
    return bool(ranked) and str(ranked[0]) in gold


def answer_by_rules(answer: str, oracle: Mapping[str, Any]) -> bool | None:
    """CRAG's rules against the answer and its alternatives: True / False when they decide, ``None`` when a
    judge must."""
    predicted = answer.strip().lower()
    if IDK in predicted or not predicted:
        return False
    truths = [str(oracle.get("answer", "")), *[str(a) for a in oracle.get("alternative_answers") or []]]
    undecided = False
    for truth in (t.strip().lower() for t in truths if str(t).strip()):
        if predicted == truth or ("invalid" in predicted and "invalid" in truth):
            return True
        if ("invalid" in predicted) == ("invalid" in truth):
            undecided = True
    return None if undecided else False


def evaluator_prompt(question: str, answer: str, oracle: Mapping[str, Any]) -> str:
    """The paper's evaluator prompt for an answer the rules leave open."""
    return P.render(P.EVALUATOR, question=question, answer=str(oracle.get("answer", "")), prediction=answer)


def judged_accurate(reply: str) -> bool:
    """Whether the evaluator's reply says accurate (its first of accurate / incorrect / missing)."""
    match = re.search(r"(?<![a-z])(accurate|incorrect|missing)(?![a-z])", (reply or "").lower())
    return match is not None and match.group(1) == "accurate"


def retrieval_error(action: Mapping[str, Any], retrieval: Mapping[str, Any], oracle: Mapping[str, Any]) -> str:
    """STaRK's error type of a rejected action, from the answer ids (see the module docstring)."""
    gold = {str(a) for a in oracle.get("answer_ids") or []}
    if action.get("module") != "graph":
        return "incorrect document"
    reached = {str(i) for i in retrieval.get("ranked_ids") or []}
    entities = len(retrieval.get("linked") or {}) or len(action.get("entities") or [])
    if entities >= 2 and not reached:
        return "no intersection"
    if entities >= 2 and not reached & gold:
        return "incorrect intersection"
    if entities == 1 and reached & gold:
        return "missing entity"
    return "incorrect entity/relation"


def generation_error(action: Mapping[str, Any], oracle: Mapping[str, Any]) -> str:
    """CRAG's error type of a rejected action, from the question's labels (see the module docstring)."""
    for key, label, error in (("question_type", "question_type", "incorrect question type"),
                              ("dynamism", "static_or_dynamic", "incorrect question dynamism"),
                              ("domain", "domain", "incorrect question domain")):
        gold = _label(oracle.get(label))
        if gold and _label(action.get(key)) != gold:
            return error
    from_graph = bool(str(oracle.get("popularity") or "").strip())
    if action.get("module") == "graph":
        return "incorrect entity and relation" if from_graph else "incorrect retrieval module"
    return "incorrect retrieval module"
