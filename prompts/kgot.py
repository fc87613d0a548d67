"""Prompt templates of the KGoT workflow (paper, appendix C), XML-sectioned, with in-context examples.

Templates are ``str.format`` strings with named placeholders; :func:`~kgagents.prompts.template.render` fills
them and fails loudly on a missing or unexpected placeholder. Where the KG's query language matters (writing
and reading the KG), the template takes a ``{language}`` guide and ``{examples}`` chosen from
:data:`LANGUAGES`; database backends add their own entry to that table, the workflow stays the same.
"""

from __future__ import annotations

from dataclasses import dataclass

# the machinery, re-exported: the workflows' nodes call ``P.render`` with ``P`` this module
from kgagents.prompts.template import Prompt as Prompt
from kgagents.prompts.template import Template as Template
from kgagents.prompts.template import placeholders as placeholders
from kgagents.prompts.template import render as render


@dataclass(frozen=True)
class QueryLanguage:
    """How the LLM talks to one kind of KG backend."""

    name: str
    write_guide: str
    write_examples: str
    read_guide: str
    read_examples: str

    def for_dialect(self, dialect: object | None) -> QueryLanguage:
        """The language as one server speaks it (a store's ``dialect``, e.g. Neo4j's Cypher or FalkorDB's);
        languages without dialects are the same everywhere."""
        return self


PYTHON_NETWORKX = QueryLanguage(
    name="Python (NetworkX)",
    write_guide="""Write Python code that updates the NetworkX MultiDiGraph `G` (already loaded; `nx` is networkx).
- Add a node with G.add_node("<unique id>", label="<Type>", <property>=<value>, ...). Every node needs a `label`.
- Add a relationship with G.add_edge("<source id>", "<target id>", relationship="<TYPE>", <property>=<value>).
- Update a property with G.nodes["<id>"]["<property>"] = <value>.
- Reuse the ids of existing nodes instead of adding duplicates (check `"<id>" in G` or search by property).
- Property values must be JSON values: strings, numbers, booleans, lists or dicts of them.
- Do not import other modules, read files or use the network; only modify G.""",
    write_examples="""<example_write_1>
New information: The array in the script is [42, 23, 2, 88, 37, 15].
Code:
G.add_node("array_1", label="Array", values=[42, 23, 2, 88, 37, 15])
G.add_node("script_1", label="Script", language="C++")
G.add_edge("script_1", "array_1", relationship="CONTAINS")
</example_write_1>
<example_write_2>
New information: Marie Curie won the Nobel Prize in Physics (1903) and in Chemistry (1911).
Code:
G.add_node("marie_curie", label="Person", name="Marie Curie")
for pid, field, year in [("nobel_physics_1903", "Physics", 1903), ("nobel_chemistry_1911", "Chemistry", 1911)]:
    G.add_node(pid, label="Award", name=f"Nobel Prize in {field}", year=year)
    G.add_edge("marie_curie", pid, relationship="WON")
</example_write_2>""",
    read_guide="""Write Python code that reads the NetworkX MultiDiGraph `G` (`nx` is networkx) and stores the answer
in a variable named `result`.
- Nodes: G.nodes["<id>"] gives the attributes, G.nodes(data=True) iterates them; the type is the `label` attribute.
- Relationships: G.edges(data=True) gives (source, target, attributes); the type is the `relationship` attribute.
- Do not modify G. Do not compute the final answer beyond what the data gives; return the relevant values.""",
    read_examples="""<example_retrieve_1>
Initial problem: Retrieve all books written by 'J.K. Rowling'.
Code:
authors = [n for n, a in G.nodes(data=True) if a.get("label") == "Author" and a.get("name") == "J.K. Rowling"]
result = [G.nodes[t]["title"] for s, t, a in G.edges(data=True) if s in authors and a.get("relationship") == "WROTE"]
</example_retrieve_1>
<example_retrieve_2>
Initial problem: Sort the array in the script and add the third and fifth values.
Code:
values = sorted(next(a["values"] for n, a in G.nodes(data=True) if a.get("label") == "Array"))
result = {"sorted": values, "third": values[2], "fifth": values[4]}
</example_retrieve_2>""",
)

LANGUAGES: dict[str, QueryLanguage] = {"python": PYTHON_NETWORKX}


NEXT_STEP = """<task>
You are a problem solver using a knowledge graph to solve a given problem. The knowledge graph may be incomplete.
</task>

<instructions>
Understand the initial problem, its nuances, ALL the existing data in the knowledge graph and the tools already
called. Can you solve the initial problem using the existing data?
- If the existing data is sufficient to solve the problem in a zero-shot manner, set query_type to RETRIEVE, say
  in `reason` why it suffices, and {solve_operation}
- If the existing data is insufficient, set query_type to INSERT, explain in `reason` why you cannot solve the
  problem and exactly which information is missing, and leave `solve_operation` empty.
- Do not make up data and do not assume anything: if a piece of information is missing, choose INSERT.
- If you only have part of the information (for example some calculations or lookups are still needed on data
  that is not in the graph), choose INSERT.
- The problem's attachments (if any) are not in the graph until a tool has read them.
{solve_guide}
</instructions>

<examples>
<examples_retrieve>
{retrieve_examples}
</examples_retrieve>
<examples_insert>
<example_insert_1>
Initial problem: What is the population of the capital of the country that won the 2010 FIFA World Cup?
Existing data: a node Tournament(name: '2010 FIFA World Cup', winner: 'Spain').
query_type: INSERT
reason: The winner (Spain) is known, but the graph holds neither Spain's capital nor its population.
solve_operation: (empty)
</example_insert_1>
</examples_insert>
</examples>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>

<tool_calls_made>
{tool_calls_made}
</tool_calls_made>
"""

#: NEXT_STEP's RETRIEVE rule and examples when the solve operation is the answer itself (Direct Retrieval).
NEXT_STEP_DIRECT = {
    "solve_operation": "give in `solve_operation` the solution you derive from the existing data, with the values "
                       "it rests on.",
    "solve_guide": "",
    "retrieve_examples": """<example_retrieve_1>
Initial problem: How many studio albums did the band release between 2000 and 2009?
Existing data: Album(title 'A', year 2001, type 'studio'), Album(title 'B', year 2004, type 'live'),
Album(title 'C', year 2008, type 'studio'), and no other album of the band.
query_type: RETRIEVE
reason: The graph lists every album with its year and type.
solve_operation: 2 (the studio albums A, 2001, and C, 2008)
</example_retrieve_1>""",
}


def next_step_query_mode(language: QueryLanguage) -> dict[str, str]:
    """NEXT_STEP's RETRIEVE rule, guide and examples when the solve operation is a read query in ``language``."""
    return {
        "solve_operation": f"write in `solve_operation` the {language.name} code that reads from the graph the data "
                           "that solves the problem (it is run on the graph as it is).",
        "solve_guide": f"When you write the {language.name} code:\n{language.read_guide}",
        "retrieve_examples": language.read_examples,
    }


MERGE_REASONS = """<task>
You are a logic expert. Your task is to determine why a given problem cannot be solved with the existing data in
a knowledge graph.
</task>

<instructions>
You are given a list of reasons. Combine them into a single, coherent paragraph without duplicates.
- Carefully review and understand each reason.
- Synthesize the reasons into one unified text that says precisely which information is missing.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<list_of_reasons>
{reasons}
</list_of_reasons>
"""

DEFINE_TOOL_CALLS = """<task>
You are an information retriever tasked with populating a knowledge graph with the information needed to solve
the initial problem. Call the tools that obtain the missing information.
</task>

<instructions>
1. Understand requirements: read the initial problem and the missing information carefully.
2. Gather information: choose the tools that can obtain exactly the missing information.
3. Detailed usage: give each tool precise, self-contained arguments (full file paths, full questions).
4. Utilize existing data: do not ask for information the knowledge graph already holds.
5. Avoid redundant calls: never repeat a tool call listed in the tool calls made with the same arguments.
6. Ensure uniqueness: each call in this turn must differ from the others.
7. Default tool: when no specialised tool fits, ask the LLM tool.
8. Do not hallucinate: do not invent facts, file names or URLs.
Call at least one tool.
</instructions>

<examples>
<example_1>
Missing information: the values of the array in the attached script /data/task/script.cpp.
Tool call: inspect_file_as_text(file_path="/data/task/script.cpp", question="What values does the array hold?")
</example_1>
<example_2>
Missing information: the sum of the third and fifth values of the sorted array [42, 23, 2, 88, 37, 15].
Tool call: run_python_code(code="v = sorted([42, 23, 2, 88, 37, 15])\\nprint(v, v[2] + v[4])")
</example_2>
</examples>

<initial_problem>
{problem}
</initial_problem>

<attachments>
{attachments}
</attachments>

<existing_data>
{existing_data}
</existing_data>

<missing_information>
{missing_information}
</missing_information>

<tool_calls_made>
{tool_calls_made}
</tool_calls_made>
"""

WRITE_KG = """<task>
You are a problem solver tasked with updating an incomplete knowledge graph ({language_name}). You have just
acquired new information that must be integrated into the graph.
</task>

<instructions>
0. Understand the context: the initial problem, the existing data and the missing information.
1. Use the provided new information only.
2. No calculations: store the facts as given; computing is done later.
3. Avoid duplicates: reuse and update existing nodes instead of creating new ones.
4. Group related operations in one piece of code.
5. Store what is relevant to the initial problem, with the exact values (numbers, names, dates, quotes).
6. Use meaningful labels and relationship types.
7. If the new information contains nothing relevant, return empty code.
{language_guide}
</instructions>

<examples>
{examples}
</examples>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>

<missing_information>
{missing_information}
</missing_information>

<new_information>
{new_information}
</new_information>
"""

FIX_CODE = """<task>
You are an expert in {language_name}. The given code failed. Fix it so that it runs successfully and still does
what it was meant to do.
</task>

<instructions>
1. Analyse the code and the error log and find the root cause (look out for wrongly escaped characters, missing
   attributes, wrong names and syntax errors).
2. Correct the code with a minimal, well-scoped change.
3. Return the complete corrected code.
{language_guide}
</instructions>

<code>
{code}
</code>

<error_log>
{error}
</error_log>
"""

RETRIEVE = """<task>
You are a problem solver using a knowledge graph ({language_name}). Write code that retrieves from the graph the
information that solves the initial problem.
</task>

<instructions>
1. Understand the initial problem, its nuances and the existing data.
2. Write one piece of code that returns the data needed for the answer.
{language_guide}
</instructions>

<examples>
{examples}
</examples>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>
"""

REGENERATE_QUERY = """<task>
You are a problem solver expert in using a knowledge graph ({language_name}). A previous query did not give a
usable result. Write a new query from scratch that returns the correct result.
</task>

<instructions>
1. Understand the initial problem, its nuances and the existing data.
2. Analyse the wrong query and why it failed or returned an empty result.
3. Write a new query that retrieves the data needed to solve the initial problem.
{language_guide}
</instructions>

<examples>
{examples}
</examples>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>

<wrong_query>
{wrong_query}
</wrong_query>

<error_log>
{error}
</error_log>
"""

DIRECT_RETRIEVAL = """<task>
You are a problem solver. Solve the initial problem using only the data in the knowledge graph given below.
</task>

<instructions>
1. Understand the initial problem, its nuances and ALL the existing data.
2. Derive the solution from the existing data only; do not invent facts.
3. Give the solution with the values it rests on.
</instructions>

<examples>
<example_retrieve_1>
Initial problem: Retrieve all books written by 'J.K. Rowling'.
Existing data: Author(A1, name 'J.K. Rowling') -WROTE-> Book(B1, 'Harry Potter and the Philosopher's Stone'),
Author(A1) -WROTE-> Book(B2, 'Harry Potter and the Chamber of Secrets'), Author(A2, 'George R.R. Martin') -WROTE->
Book(B3, 'A Game of Thrones')
Solution: Harry Potter and the Philosopher's Stone, Harry Potter and the Chamber of Secrets
</example_retrieve_1>
<example_retrieve_2>
Initial problem: List all colleagues of 'Bob'.
Existing data: Employee Alice, Bob -WORKS_IN-> Department HR; Charlie -WORKS_IN-> Engineering
Solution: Alice
</example_retrieve_2>
</examples>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>
"""

FORCED_SOLUTION = """<task>
You are a problem solver. The budget for collecting more information is spent: give the best solution the
knowledge graph supports, even if it is incomplete.
</task>

<instructions>
1. Understand the initial problem and ALL the existing data.
2. Derive the most likely solution from the existing data; do not invent facts that contradict it.
3. If the data gives no basis for any answer at all, say so plainly.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>
"""

FORCED_RETRIEVE = """<task>
You are a problem solver using a knowledge graph ({language_name}). No more information will be collected: write
code that reads from the graph the data that comes closest to solving the initial problem, even if the graph is
incomplete.
</task>

<instructions>
1. Understand the initial problem, its nuances and ALL the existing data.
2. Write one piece of code that returns the data most relevant to the answer; prefer returning related values to
   returning nothing.
{language_guide}
</instructions>

<examples>
{examples}
</examples>

<initial_problem>
{problem}
</initial_problem>

<existing_data>
{existing_data}
</existing_data>
"""

NEED_FOR_MATH = """<task>
You are an expert in identifying the need for mathematical or probabilistic calculations. Given an initial
problem and a partial solution, decide whether further calculations are needed to reach the complete solution.
</task>

<instructions>
- Analyse the initial problem and the partial solution.
- Look for numerical analysis, calculations or probabilistic reasoning the problem asks for that the partial
  solution has not done yet.
- Set need_math to true if the complete solution requires more calculations, otherwise false.
- Focus on whether calculations are needed, not on what kind.
</instructions>

<examples>
<example_1>
Initial problem: Sort the array and add the third and fifth values.
Partial solution: The sorted array is [2, 15, 23, 37, 42, 88].
need_math: true (the sum of the third and fifth values is not computed yet)
</example_1>
<example_2>
Initial problem: Who wrote "Dune"?
Partial solution: Frank Herbert
need_math: false
</example_2>
</examples>

<initial_problem>
{problem}
</initial_problem>

<partial_solution>
{partial_solution}
</partial_solution>
"""

MATH_WITH_PYTHON = """<task>
You are a math and Python expert tasked with solving a mathematical problem.
</task>

<instructions>
1. Understand the problem: read the initial problem and the partial solution; state which calculations are needed.
2. Perform the calculations with the run_python_code tool: write Python code that computes the required values
   from the partial solution and the initial problem. Print the reasoning steps and ALWAYS print the final answer.
3. Do not hallucinate: use only information from the initial problem and the partial solution, and do not
   calculate by hand.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<partial_solution>
{partial_solution}
</partial_solution>
"""

FORMAT_GAIA = """4. Your final answer should be a number OR as few words as possible OR a comma separated list of numbers
   and/or strings.
5. Your final answer MUST follow any formatting instruction of the initial problem (alphabetisation, sequencing,
   units, rounding, decimal places, ...).
6. If you are asked for a number, express it with digits, without commas, without rounding unless asked, and
   without units such as $ or USD or percent signs unless specified otherwise.
7. If you are asked for a string, do not use articles or abbreviations (e.g. for cities) unless specified
   otherwise, and no final punctuation such as '.', '!' or '?'.
8. If you are asked for a comma separated list, apply the rules above to each element."""

FORMAT_DEFAULT = """4. Answer in one short, complete sentence or phrase that directly answers the initial problem.
5. Follow any formatting instruction of the initial problem.
6. Keep numbers exact as given by the partial solution."""

FORMATTERS = {"gaia": FORMAT_GAIA, "default": FORMAT_DEFAULT}

PARSE_SOLUTION = """<task>
You are a formatter and extractor. Combine the partial solution and format it as the initial problem asks.
</task>

<instructions>
1. Understand the initial problem, its nuances, the desired output and its format.
2. Review the partial solution.
3. Integrate the pieces of the partial solution into the complete solution. Do not invent any new information.
{format_rules}
If the partial solution does not contain an answer to the problem, set final_answer to an empty string.
</instructions>

<examples>
<example_1>
Initial problem: Sort the array and add the third and fifth values.
Partial solution: sorted [2, 15, 23, 37, 42, 88]; third 23, fifth 42; sum 65
final_answer: 65
</example_1>
<example_2>
Initial problem: Which cities hosted the Summer Olympics in 2008 and 2012? Answer alphabetically.
Partial solution: 2012 London; 2008 Beijing
final_answer: Beijing, London
</example_2>
</examples>

<initial_problem>
{problem}
</initial_problem>

<given_partial_solution>
{partial_solution}
</given_partial_solution>
"""

CHOOSE_SOLUTION = """<task>
You are a judge. Several candidate final answers were extracted for the same problem; choose the one best
supported by the partial solution.
</task>

<instructions>
1. Understand the initial problem and the partial solution.
2. Compare the candidates; prefer the one that is correct, complete and formatted as the problem asks.
3. Return the index (starting at 0) of the chosen candidate.
</instructions>

<initial_problem>
{problem}
</initial_problem>

<partial_solution>
{partial_solution}
</partial_solution>

<candidates>
{candidates}
</candidates>
"""
