"""The LLM judge of CRAG's local evaluation (Meta's Comprehensive RAG benchmark), used by :mod:`kgagents.evals.crag`.

Provenance: the instructions are CRAG's ``INSTRUCTIONS`` and the in-context examples its
``IN_CONTEXT_EXAMPLES`` (facebookresearch/CRAG ``prompts/templates.py`` @ ``ad1518887dd4``, CC BY-NC 4.0:
non-commercial use, with attribution); the 35 examples are read from
``evals/data/crag/crag_judge_incontext_examples.json`` and written back in CRAG's layout
(``Question: "..."`` / ``Ground Truth: "..."`` / ``Prediction: "..."`` /
``Output: {"score": N, "explanation": "..."}``). As in CRAG,
the instructions and examples are the system message and each (question, ground truth, prediction) the user
message, in CRAG's exact format; the system message adds only XML-like section tags around CRAG's text. The
judge's calls are named ``crag judge`` by their metadata (:class:`~kgagents.prompts.template.Template`),
not by any text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kgagents.prompts.template import Template, render

__all__ = ["EXAMPLE", "INSTRUCTIONS", "SYSTEM", "USER", "judge_system", "judge_user", "render_examples"]

#: CRAG's grading instructions, verbatim.
INSTRUCTIONS = """Assume you are a human expert in grading predictions given by a model. You are given a \
question and a model prediction. Judge if the prediction matches the ground truth answer by following these \
steps:
1: Take it as granted that the Ground Truth is always correct.
2: If the Prediction indicates it is not sure about the answer, "score" should be "0"; otherwise, go the \
next step.
3: If the Prediction exactly matches the Ground Truth, "score" is 1.
4: If the Prediction does not exactly match the Ground Truth, go through the following steps and likely give \
a score as 0.
5: If the Ground Truth is a number, "score" is 1 if and only if the Prediction gives a number that almost \
exactly matches the ground truth.
6: If the Prediction is self-contradictory, "score" must be 0.
7: If the prediction is not answering the question, "score" must be 0.
8: If the prediction is a concise and correct summary of the ground truth, "score" is 1.
9: If ground truth contains a set of items, prediction must contain exactly same items for the score to be 1.
10: Otherwise, "score" is 0.

### Output a JSON blob with an "explanation" field explaining your answer as short as possible and an \
"score" field with value 1 or 0."""

#: One in-context example, as CRAG writes them.
EXAMPLE = """Question: "{question}"
Ground Truth: "{ground_truth}"
Prediction: "{prediction}"
Output: {output}"""

#: The system message: CRAG's instructions, then its examples (``render_examples``).
SYSTEM = """<instructions>
{instructions}
</instructions>
<examples>
You should make the judgment based on provided examples.
Examples:
{examples}
</examples>"""

#: The user message of one judgement, CRAG's format exactly (leading spaces included).
USER = Template("crag judge", "Question: {question}\n Ground truth: {ground_truth}\n Prediction: {prediction}\n")


def render_examples(examples: Sequence[Mapping[str, Any]]) -> str:
    """The in-context examples ``{question, ground_truth, prediction, expected_score, explanation}`` in CRAG's
    layout, separated by blank lines; a malformed example is an error that names it."""
    parts = []
    for n, example in enumerate(examples):
        missing = {"question", "ground_truth", "prediction", "expected_score", "explanation"} - set(example)
        if missing:
            raise ValueError(f"judge example {n} lacks {', '.join(sorted(missing))}")
        verdict = {"score": int(example["expected_score"]), "explanation": str(example["explanation"])}
        output = json.dumps(verdict, ensure_ascii=False)
        parts.append(render(EXAMPLE, question=example["question"], ground_truth=example["ground_truth"],
                                    prediction=example["prediction"], output=output))
    return "\n\n".join(parts)


def judge_system(examples: Sequence[Mapping[str, Any]]) -> str:
    """The judge's system message with these in-context examples."""
    return render(SYSTEM, instructions=INSTRUCTIONS, examples=render_examples(examples))


def judge_user(question: str, ground_truth: str, prediction: str) -> str:
    """The judge's user message for one prediction against one ground truth."""
    return render(USER, question=question, ground_truth=ground_truth, prediction=prediction)
