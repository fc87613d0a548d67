"""Prompt templates of the ARK-V1 workflow (paper §III, Figure 1), filled with
:func:`kgagents.prompts.template.render`.

The message context of one reasoning step grows as the figure's steps add to it: the system prompt and the
question (step 1), then the summary of the previous steps (step 10), then each stage's instruction and the model's
replies. Each call of the model is named by its stage (:data:`ANCHOR_STAGE` ...: the reasoning step, the decision,
the attempt), which travels as the call's metadata -- traces and scripted models read it -- never as text the
model reads.
"""

from __future__ import annotations

from kgagents.prompts.template import placeholders, render

__all__ = [
           "ANCHOR_NOT_HEAD",
           "ANCHOR_NO_RELATIONS",
           "ANCHOR_STAGE",
           "ANSWER_ENTITY_LIST",
           "ANSWER_YES_NO",
           "ANSWER_YES_NO_LAST_RESORT",
           "FINAL_ANSWER",
           "FINAL_STAGE",
           "GAVE_UP",
           "GAVE_UP_STAGE",
           "KEYS_INVALID",
           "NO_RELATIONS",
           "NO_STEPS",
           "QUESTION",
           "REASONING",
           "REASONING_STAGE",
           "RELATIONS",
           "RELATION_INVALID",
           "RELATION_STAGE",
           "REPLY_UNPARSED",
           "SELECT_ANCHOR",
           "SELECT_RELATION",
           "STEP_SUMMARY",
           "SUMMARY",
           "SYSTEM",
           "TRIPLES",
           "placeholders",
           "render",
]

# --------------------------------------------------------------------------------------------------------------
# Step 1: the system prompt and the question; step 10: the summary that replaces the context
# --------------------------------------------------------------------------------------------------------------
SYSTEM = """You answer questions by exploring a knowledge graph (KG) one reasoning step at a time.
The KG is a set of directed edges (head entity, relation, tail entity), some with qualifiers (key-value details
such as dates). You cannot see the KG as a whole: you are guided through a fixed procedure and each stage tells
you what to return.

Procedure of one reasoning step:
1. Select ONE anchor entity: the exact name of an entity of the KG that has outgoing edges and is most likely to
   lead to the facts you need (usually an entity named in the question, or one found in an earlier step).
2. From the anchor's outgoing relations, select ONE relation to follow (or give up on the anchor with an empty
   relation; you are then asked for another anchor).
3. You receive the triples for the anchor and relation, each with a short key. Select the keys of the triples
   your reasoning uses, state what they imply for the question, and say whether to continue exploring.
After each step the conversation is replaced by a summary of all steps so far. When you stop (or the step budget
is spent) you give the final answer from those steps.

Rules:
- Names of entities and relations must match the KG exactly (same spelling, accents and punctuation).
- Reason from the retrieved triples; use common sense only to connect them to the question.
- Continue exploring while facts the answer depends on are still missing; stop once they are all known.
- Always reply in the structured format requested."""

QUESTION = """Question: {question}"""

SUMMARY = """Summary of the {count} reasoning step(s) so far:
{steps}"""

NO_STEPS = "(no completed reasoning steps)"

STEP_SUMMARY = """Reasoning step {k}: anchor "{anchor}", relation "{relation}".
  Triples used: {triples}
  Implication: {implication}"""

# --------------------------------------------------------------------------------------------------------------
# Steps 3-4: anchor selection
# --------------------------------------------------------------------------------------------------------------
#: The stages that name the model's calls (their metadata; see the module docstring).
ANCHOR_STAGE = "reasoning step {k}, select anchor, attempt {attempt}"
GAVE_UP_STAGE = "reasoning step {k}, back to anchor selection"
RELATION_STAGE = "reasoning step {k}, select relation, attempt {attempt}"
REASONING_STAGE = "reasoning step {k}, reasoning, attempt {attempt}"
FINAL_STAGE = "final answer"

SELECT_ANCHOR = """{feedback}Task: select exactly ONE anchor entity to explore next: the exact name of an entity of the knowledge
graph (one with outgoing edges) that is most likely to lead to the information the question needs.
- Copy the name exactly as it appears in the question, the triples or the suggestions (do not translate it,
  change accents or replace spaces with underscores).
- Prefer entities whose facts are still missing from the summary."""

ANCHOR_NOT_HEAD = """Your previous anchor candidate "{candidate}" is not an entity with outgoing edges in the
knowledge graph. The closest entities that are: {alternatives}.
"""

ANCHOR_NO_RELATIONS = """The entity "{anchor}" has no outgoing relations in the knowledge graph, so it cannot be
explored. Choose another anchor entity.
"""

# --------------------------------------------------------------------------------------------------------------
# Steps 5-7: relation retrieval and selection
# --------------------------------------------------------------------------------------------------------------
RELATIONS = """The anchor entity "{anchor}" is in the knowledge graph. Its {count} outgoing relation(s):
{relations}"""

NO_RELATIONS = """The entity "{anchor}" has no outgoing relations."""

SELECT_RELATION = """{feedback}Task: select exactly ONE outgoing relation of "{anchor}" to follow towards the answer.
- Copy the relation name exactly as listed.
- If none of the relations can help, give up on this anchor: reply with an empty relation and explain why in the
  justification; you will then be asked for a different anchor entity."""

RELATION_INVALID = """Your previous relation "{candidate}" is not an outgoing relation of "{anchor}". The closest
outgoing relations are: {alternatives}.
"""

GAVE_UP = """You gave up on the anchor "{anchor}". Propose a different anchor entity: the exact name of an entity of the
knowledge graph with outgoing edges."""

# --------------------------------------------------------------------------------------------------------------
# Steps 8-9: triples and the reasoning step
# --------------------------------------------------------------------------------------------------------------
TRIPLES = """The {count} triple(s) of "{anchor}" / "{relation}", each as [key] (head, relation, tail) with its
qualifiers:
{triples}"""

REASONING = """{feedback}Task: reason over the triples retrieved in this step towards answering the question.
- triple_keys: the keys of the triples your reasoning uses, only from: {keys} (an empty list if none helps).
- implication: what the selected triples imply for the question, in one or two sentences, including which
  facts are still missing.
- continue_exploration: true if the question cannot yet be answered unambiguously from all steps so far;
  false once it can."""

KEYS_INVALID = """Your previous reply used keys that were not retrieved in this step: {invalid}. Use only the keys
listed above.
"""

REPLY_UNPARSED = """Your previous reply could not be read: {error}
"""

# --------------------------------------------------------------------------------------------------------------
# Step 11: the final answer
# --------------------------------------------------------------------------------------------------------------
FINAL_ANSWER = """It is time to answer the question: {question}
The reasoning steps so far:
{steps}

{answer_rules}"""

#: The paper's three possible answers, offered alike (§IV-B: True, False or None), as the authors' code does ("either
#: True or False. If the question couldn't be answered, it should be None."): the default.
ANSWER_YES_NO = """The question is a yes/no question (or a claim to verify). Set answer to true or false if the
reasoning steps answer it (with common sense to connect them to the question), or to null (abstain) if they do
not. Give a short justification."""

#: Abstention as a last resort (``ArkContext.abstention="last_resort"``): leans towards a definite answer, which
#: raises the answer rate at the price of conditional accuracy.
ANSWER_YES_NO_LAST_RESORT = """The question is a yes/no question (or a claim to verify). Set answer to true or
false from the reasoning steps, combined with common sense where the steps support it. Set answer to null (abstain)
only if the steps do not support either answer. Give a short justification."""

ANSWER_ENTITY_LIST = """The answer is a list of entities. Set answer to the names of the entities that answer the
question, as they appear in the triples. Give an empty list (abstain) if the reasoning steps do not identify them.
Give a short justification."""
