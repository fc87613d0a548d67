"""File tools: the Text Inspector (``inspect_file_as_text``), the Image Tool (``image_inspector``) and
ExtractZip (``extract_zip``). Importing this package registers them with the tool manager."""

from __future__ import annotations

from kgagents.core.config import Settings
from kgagents.tools.files.image import check_image_inspector, make_image_inspector
from kgagents.tools.files.inspector import make_extract_zip, make_text_inspector
from kgagents.tools.manager import ToolStatus, register_tool


def check_text_inspector(settings: Settings) -> ToolStatus:
    """Always usable: text, HTML, CSV, JSON and XML need nothing more, PDFs, Office files and images the
    ``files`` extra (each says so); answering questions and transcribing audio need the tools' model (an
    OpenAI-compatible one for audio)."""
    reason = "available" if settings.model_for("tools") else (
        "available (questions about files need a chat model for the run)")
    return ToolStatus("inspect_file_as_text", True, reason)


def check_extract_zip(settings: Settings) -> ToolStatus:
    """Always usable."""
    return ToolStatus("extract_zip", True, "available")


register_tool(make_text_inspector, name="inspect_file_as_text", check=check_text_inspector)
register_tool(make_image_inspector, name="image_inspector", check=check_image_inspector)
register_tool(make_extract_zip, name="extract_zip", check=check_extract_zip)

__all__ = ["check_extract_zip", "check_image_inspector", "check_text_inspector"]
