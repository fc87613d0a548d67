"""The Image Tool (``image_inspector``): questions about a local or remote image, answered by the tools'
multimodal chat model from LangChain image content blocks. SVG is rendered to PNG first (without fetching
anything it links to); other formats the providers do not take are converted to PNG, large images scaled down.
"""

from __future__ import annotations

import asyncio
import base64
import io
import math
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from kgagents.core.config import Settings
from kgagents.core.errors import KGAgentsError
from kgagents.prompts import files as P
from kgagents.tools.base import ToolFailure
from kgagents.tools.files.convert import kind_of
from kgagents.tools.files.sources import load
from kgagents.tools.manager import ToolEnv, ToolStatus

MAX_IMAGE_BYTES = 20 * 1024 * 1024
#: Longest side sent to the model (larger images are scaled down; providers downscale anyway).
MAX_SIDE = 2048
#: Largest canvas an SVG is rendered on (larger ones are scaled down), in pixels.
MAX_SVG_PIXELS = MAX_SIDE * MAX_SIDE
#: Raster images with more pixels are refused before they are decoded (a small file can declare a huge image:
#: decoding it would take gigabytes). Pillow only warns below twice its own limit of 89 M pixels.
MAX_PIXELS = 64 * 1024 * 1024
PROVIDER_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


class _TooLarge(KGAgentsError):
    def __init__(self, width: float, height: float) -> None:
        super().__init__(f"{width:.0f}x{height:.0f}")
        self.width, self.height = width, height


def _bounded_png_surface() -> type[Any]:
    """cairosvg's PNG surface that refuses to allocate more than :data:`MAX_SVG_PIXELS` (an SVG can declare
    any size: ``width="30000"`` would make a 3.6 GB canvas)."""
    from cairosvg.surface import PNGSurface  # the files extra: only for SVG images

    if not callable(getattr(PNGSurface, "_create_surface", None)):  # the private method the bound rests on
        raise ToolFailure("this cairosvg version makes its canvas otherwise, so the size of an SVG cannot be "
                          "bounded; SVG images are not rendered (see docs/dependencies.md)")

    class BoundedPNGSurface(PNGSurface):
        def _create_surface(self, width: float, height: float) -> Any:
            if width * height > MAX_SVG_PIXELS:
                raise _TooLarge(width, height)
            return super()._create_surface(width, height)

    return BoundedPNGSurface


def svg_to_png(data: bytes) -> bytes:
    """Render an SVG to PNG; linked files and URLs are not fetched and XML entities are refused
    (``unsafe=False``: only ``data:`` URLs are read). An SVG that declares a larger canvas than
    :data:`MAX_SVG_PIXELS` is rendered scaled down to it."""
    surface = _bounded_png_surface()
    scale = 1.0
    for _ in range(3):
        try:
            return surface.convert(bytestring=data, unsafe=False, scale=scale)
        except _TooLarge as big:
            scale *= 0.99 * math.sqrt(MAX_SVG_PIXELS / (big.width * big.height))
        except Exception as exc:
            raise ToolFailure(f"cannot render the SVG image: {type(exc).__name__}: {exc}") from exc
    raise ToolFailure("cannot render the SVG image within the size limit")


def prepare_image(data: bytes, name: str = "image", mimetype: str | None = None) -> tuple[str, str]:
    """An image as ``(base64, mime type)`` in a format every provider takes, at most :data:`MAX_SIDE` px."""
    from PIL import Image, UnidentifiedImageError  # the files extra: only for images

    if len(data) > MAX_IMAGE_BYTES:
        raise ToolFailure(f"{name} is {len(data) / 2**20:.1f} MB; images up to {MAX_IMAGE_BYTES / 2**20:.0f} MB "
                          "are accepted")
    if kind_of(data, filename=name, mimetype=mimetype) == "svg":
        data = svg_to_png(data)
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
            if width * height > MAX_PIXELS:
                raise ToolFailure(f"{name} declares {width}x{height} pixels; images up to "
                                  f"{MAX_PIXELS / 1e6:.0f} M pixels are read (refused before decoding)")
            img.load()
            fmt = (img.format or "").upper()
            if fmt in PROVIDER_FORMATS and max(img.size) <= MAX_SIDE:
                return base64.b64encode(data).decode("ascii"), PROVIDER_FORMATS[fmt]
            out = img.convert("RGBA") if img.mode in {"P", "LA", "RGBA", "I;16"} else img.convert("RGB")
            out.thumbnail((MAX_SIDE, MAX_SIDE))
            buffer = io.BytesIO()
            out.save(buffer, format="PNG")
            return base64.b64encode(buffer.getvalue()).decode("ascii"), "image/png"
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
        raise ToolFailure(f"{name} is not a readable image ({type(exc).__name__}: {exc}); for documents use "
                          "inspect_file_as_text") from exc


def image_message(question: str, b64: str, mime: str, source: str) -> list:
    """The chat messages asking ``question`` about one image (a LangChain image content block)."""
    text = P.IMAGE_QA.format(source=source, question=question) if question else P.IMAGE_CAPTION
    return [SystemMessage(P.IMAGE_QA_SYSTEM),
            HumanMessage(content=[{"type": "text", "text": text},
                                  {"type": "image", "base64": b64, "mime_type": mime}])]


async def inspect_image(env: ToolEnv, source: str, question: str | None = None) -> str:
    """The tools' model's answer to ``question`` about the image at ``source`` (path or URL)."""
    if env.llm is None:
        raise ToolFailure("no chat model is configured for the tools; image_inspector needs a multimodal "
                          "(vision) model: set KGAGENTS_TOOLS_MODEL (e.g. openai:gpt-4o-mini)")
    loaded = await load(env, source, max_bytes=MAX_IMAGE_BYTES)
    kind = kind_of(loaded.data, filename=loaded.name, mimetype=loaded.mimetype)
    if kind == "audio":
        raise ToolFailure(f"{loaded.name} is audio: use inspect_file_as_text, which transcribes it")
    if kind == "archive":
        raise ToolFailure(f"{loaded.name} is a zip archive: use extract_zip")
    b64, mime = await asyncio.to_thread(prepare_image, loaded.data, loaded.name, loaded.mimetype)
    reply = await env.ask_llm(image_message((question or "").strip(), b64, mime, loaded.source))
    text = reply.text if isinstance(getattr(reply, "text", None), str) else str(reply.content)
    return text.strip() or "(the model gave no answer about the image)"


class ImageInput(BaseModel):
    image_path: str = Field(description="Local path or URL of the image (.png, .jpg, .jpeg, .gif, .webp, .svg, "
                                        ".bmp, .tif).")
    question: str | None = Field(default=None, description="Your question about the image; omit it for a "
                                                           "detailed caption.")


class ImageInspectorTool(BaseTool):
    """Answer questions about an image with a multimodal model."""

    name: str = "image_inspector"
    description: str = (
        "Look at an image (a local path or a URL) and answer a question about it: text in the image, objects, "
        "people, charts and their values, positions. Handles PNG, JPEG, GIF, WEBP, BMP, TIFF and SVG. It does "
        "not handle audio or documents (use inspect_file_as_text). Example: image_inspector(image_path="
        "\"/data/chart.png\", question=\"What is the highest value on the y-axis?\")"
    )
    args_schema: type[BaseModel] = ImageInput
    env: ToolEnv
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, image_path: str, question: str | None = None) -> str:  # pragma: no cover - async only
        raise NotImplementedError("image_inspector runs asynchronously")

    async def _arun(self, image_path: str, question: str | None = None) -> str:
        return await inspect_image(self.env, image_path, question)


def make_image_inspector(env: ToolEnv) -> ImageInspectorTool:
    """The ``image_inspector`` tool of one run."""
    return ImageInspectorTool(env=env)


def check_image_inspector(settings: Settings) -> ToolStatus:
    """Available with the ``files`` extra and a chat model; it must accept images (a vision model), which only
    a call can tell."""
    missing = ToolStatus.missing_extra("image_inspector", "PIL", "cairosvg")
    if missing is not None:
        return missing
    if settings.model_for("tools"):
        return ToolStatus("image_inspector", True, "available (needs a vision-capable tools model)")
    return ToolStatus("image_inspector", True, "available when a vision-capable chat model is configured for "
                                               "the run (KGAGENTS_MODEL or KGAGENTS_TOOLS_MODEL)")
