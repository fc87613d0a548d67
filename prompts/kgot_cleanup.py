"""The noise-mitigation prompt of KGoT (paper §2.4, appendix B.7): before solving, remove what does not help."""

from __future__ import annotations

NOISE_MITIGATION = """<task>
You are a knowledge graph curator. Before the initial problem is solved from the knowledge graph below, remove
the noise: nodes and relationships that are irrelevant to the problem, and duplicates of other nodes.
</task>

<instructions>
1. Understand the initial problem and ALL the existing data.
2. Irrelevant: a node or relationship that is about something the problem does not need (for example details of
   an article when only the paper it links to matters). Keep everything the answer, or the path to it, rests on.
3. Duplicate: a node that describes the same thing as another node (same name, same values); keep the more
   complete one and remove the other.
4. Be conservative: when unsure whether something helps, keep it. Never remove everything.
5. Give the ids of the nodes to remove (their relationships go with them), the relationships to remove on their
   own (source id, type, target id), and a short reason.
</instructions>

<examples>
<example_1>
Initial problem: Under what NASA award number was the work of [researcher] supported?
Existing data: Funding(award_number) <-SUPPORTED_BY- Researcher(name) <-INVOLVES- Paper(title) <-LINKED_TO-
Article(author, title, source, publication_date)
remove_nodes: the Article and the Paper (the award of the researcher is known without them)
</example_1>
<example_2>
Initial problem: Does the quoted text match the article?
Existing data: two Article nodes with the same title and author, one with the quote and one without
remove_nodes: the Article without the quote (a duplicate)
</example_2>
</examples>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>
"""
