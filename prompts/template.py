"""The prompt machinery every workflow's templates use: a :class:`Template` is ``str.format`` text for the
model with the name of its calls (its stage) beside it; :func:`render` fills one, failing loudly on a missing
or unexpected placeholder, into a :class:`Prompt`, the text the model reads with its call's stage."""

from __future__ import annotations

import string


class Template(str):
    """A prompt template: ``str.format`` text for the model, and ``stage``, the name of its calls (a
    ``str.format`` pattern too, e.g. ``"agent thought, step {step}, candidate {candidate}"``). The stage
    travels as the call's metadata -- its run name in traces, what a scripted model recognises -- and is never
    part of the prompt."""

    stage: str

    def __new__(cls, stage: str, text: str) -> Template:
        template = super().__new__(cls, text)
        template.stage = stage
        return template

    def __reduce__(self) -> tuple[type[Template], tuple[str, str]]:
        return Template, (self.stage, str(self))


class Prompt(str):
    """A rendered prompt: the text the model reads, and the ``stage`` of its call (``None``: unnamed)."""

    stage: str | None

    def __new__(cls, text: str, stage: str | None = None) -> Prompt:
        prompt = super().__new__(cls, text)
        prompt.stage = stage
        return prompt

    def __reduce__(self) -> tuple[type[Prompt], tuple[str, str | None]]:
        return Prompt, (str(self), self.stage)


def _names(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def placeholders(template: str) -> set[str]:
    """Names of the ``{placeholders}`` of a template (its text's and its stage's)."""
    return _names(template) | (_names(template.stage) if isinstance(template, Template) else set())


def render(template: str, **values: object) -> Prompt:
    """Fill ``template``; every placeholder must be given and nothing else. The result carries the template's
    stage, filled in as well."""
    needed = placeholders(template)
    missing, extra = needed - set(values), set(values) - needed
    if missing or extra:
        raise KeyError(f"prompt placeholders: missing {sorted(missing)}, unexpected {sorted(extra)}")
    stage = template.stage.format(**values) if isinstance(template, Template) else None
    return Prompt(str.format(template, **values), stage)
