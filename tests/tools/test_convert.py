"""Files to Markdown: every format the text inspector reads, and broken or oddly encoded files."""

from __future__ import annotations

import json

import pytest

from kgagents.tools.files.convert import ConversionError, convert_bytes, convert_path, decode_text, kind_of
from tests.tools import files as F


def test_html_to_markdown_drops_scripts():
    doc = convert_bytes(F.fixture("article.html"), filename="article.html")
    assert doc.title == "Lake Vornhal"
    assert "# Lake Vornhal" in doc.text and "## Science" in doc.text
    assert "tracking" not in doc.text and "font-family" not in doc.text


def test_pdf():
    doc = convert_bytes(F.make_pdf(["Visitors in 2023: 48,211", "Second line"]), filename="r.pdf")
    assert "Visitors in 2023: 48,211" in doc.text and "Second line" in doc.text


def test_corrupt_pdf_gives_a_clear_error():
    with pytest.raises(ConversionError, match="could not read the PDF"):
        convert_bytes(F.corrupt_pdf(), filename="broken.pdf")
    with pytest.raises(ConversionError, match="not a valid PDF"):
        convert_bytes(b"plain words, not a pdf", filename="fake.pdf")


@pytest.mark.slow
def test_docx_xlsx_pptx():
    assert "The budget for 2020 was approved." in convert_bytes(
        F.make_docx(["Notes", "The budget for 2020 was approved."]), filename="n.docx").text
    sheet = convert_bytes(F.make_xlsx([["Year", "Budget"], [2019, 1200]]), filename="b.xlsx").text
    assert "Budget" in sheet and "1200" in sheet and "|" in sheet
    slides = convert_bytes(F.make_pptx("Roadmap", "Launch in Q3"), filename="s.pptx").text
    assert "Roadmap" in slides and "Launch in Q3" in slides


def test_csv_json_xml_txt():
    assert "| city | people |" in convert_bytes(b"city,people\nZurich,421878\n", filename="c.csv").text
    data = json.dumps({"name": "Vornhal", "area_km2": 14.2}).encode()
    assert '"area_km2": 14.2' in convert_bytes(data, filename="d.json").text
    xml = b'<?xml version="1.0"?><lake name="Vornhal"><area unit="km2">14.2</area></lake>'
    assert "14.2" in convert_bytes(xml, filename="d.xml").text
    assert convert_bytes(b"just text\n", filename="t.txt").text == "just text\n"


def test_non_utf8_text_is_decoded():
    doc = convert_bytes(F.fixture("latin1.txt"), filename="latin1.txt")
    assert "été" in doc.text and "cœur" in doc.text and "€" in doc.text
    assert decode_text("naïve".encode("cp1252")) == "naïve"
    assert decode_text(b"\x81\x8d\x8f") == "\x81\x8d\x8f"  # undefined in cp1252: latin-1, never an error
    assert decode_text("über".encode("utf-16")) == "über"


def test_binary_garbage_is_an_error_not_a_crash():
    with pytest.raises(ConversionError):
        convert_bytes(bytes(range(256)) * 64, filename="blob.bin")


def test_archives_are_not_opened_here():
    with pytest.raises(ConversionError, match="extract_zip"):
        convert_bytes(F.make_zip({"a.txt": b"x"}), filename="a.zip")


def test_kind_of():
    assert kind_of(F.make_png(), filename="x.png") == "image"
    assert kind_of(F.fixture("badge.svg"), filename="badge") == "svg"
    assert kind_of(F.make_wav(), filename="a.mp3") == "audio"
    assert kind_of(F.make_zip({"a": b"x"})) == "archive"
    assert kind_of(F.make_docx(["x"]), filename="x.docx") == "document"
    assert kind_of(b"hello", filename="x.txt") == "document"


def test_convert_path(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes("Grüße".encode())
    assert convert_path(path).text == "Grüße"
