"""Prompt templates of the file and page tools (named ``{placeholders}``, filled with ``str.format``)."""

from __future__ import annotations

DOCUMENT_QA_SYSTEM = (
    "You read documents for a colleague who cannot see them and answer their question from the document "
    "alone. Quote exact figures, names and wording where they matter. If the document does not contain the "
    "answer, say so plainly and describe what it does contain."
)

#: One call over a whole document.
DOCUMENT_QA = """<document title="{title}" source="{source}">
{text}
</document>

<question>
{question}
</question>

Answer the question from the document above. Use these three headings:
1. Short answer
2. Extremely detailed answer
3. Additional context on the document and question asked"""

#: One chunk of a document too long for a single call.
CHUNK_NOTES = """<document_part title="{title}" source="{source}" part="{part}" parts="{parts}">
{text}
</document_part>

<question>
{question}
</question>

This is part {part} of {parts} of a document. Write down everything in this part that helps answer the
question (exact quotes, figures, names, where they appear). If nothing here is relevant, reply exactly:
NOTHING RELEVANT"""

#: Combining the notes of every chunk.
COMBINE_NOTES = """<notes title="{title}" source="{source}">
{notes}
</notes>

<question>
{question}
</question>

The notes above were taken from the parts of one document. Answer the question from them. Use these three
headings:
1. Short answer
2. Extremely detailed answer
3. Additional context on the document and question asked"""

IMAGE_QA_SYSTEM = (
    "You look at an image for a colleague who cannot see it. Describe precisely what is relevant to their "
    "question: visible text (transcribed exactly), numbers, objects, people, charts and their values, layout. "
    "Say when something is unreadable or uncertain instead of guessing."
)

IMAGE_QA = """Image: {source}

Question: {question}

Answer from the image. Start with a short answer, then give the details you see that support it."""

IMAGE_CAPTION = "Write a detailed caption for this image: everything visible, including any text, exactly."
