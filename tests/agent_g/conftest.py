"""Agent-G fixtures: a STaRK-PrimeKG-shaped knowledge base (drugs, genes, diseases, each with a document) and
script builders for the scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.pgraph.build import GraphBuilder

QUESTION = "What drugs target the CYP3A4 enzyme and are used to treat strongyloidiasis?"


@pytest.fixture()
def prime(tmp_path) -> str:
    """Ivermectin is the one drug with enzyme CYP3A4 and indication strongyloidiasis; Rifampin shares the enzyme,
    Albendazole the indication; Aspirin shares nothing."""
    return build_prime(tmp_path / "prime")


def build_prime(folder: Path) -> str:
    """The knowledge base of the :func:`prime` fixture, built in ``folder``; returns its path."""
    b = GraphBuilder(folder)

    def node(node_id: str, kind: str, name: str, text: str) -> None:
        b.add_node(node_id, type=kind, name=name, features={"text": f"- name: {name}\n- type: {kind}\n{text}"})

    node("0", "drug", "Ivermectin", "- details: a broad-spectrum anti-parasite medication.")
    node("6", "drug", "Rifampin", "- details: an antibiotic that induces CYP3A4.")
    node("8", "drug", "Albendazole", "- details: an anthelmintic for roundworm infections.")
    node("9", "drug", "Aspirin", "- details: a pain reliever.")
    node("1", "gene/protein", "CYP3A4", "- details: a liver enzyme that metabolises drugs.")
    node("5", "disease", "strongyloidiasis", "- details: a roundworm infection.")
    node("7", "disease", "tuberculosis", "- details: a bacterial infection of the lungs.")
    for drug, gene in (("0", "1"), ("6", "1")):
        b.add_edge(drug, "enzyme", gene)
        b.add_edge(gene, "enzyme", drug)
    for drug, disease in (("0", "5"), ("8", "5"), ("6", "7")):
        b.add_edge(drug, "indication", disease)
        b.add_edge(disease, "indication", drug)
    b.finish(name="prime", fingerprint="pr" * 8, source={"path": "test"})
    return str(folder)


def step(when: str, *, times: int = 1, **reply: Any) -> dict[str, Any]:
    return {"when": when, "times": times, **reply}


def decide(iteration: int | str, *, source: str = "knowledge graph", entities=(), relations=(), times: int = 1,
           context: str = "", **extra: Any) -> dict[str, Any]:
    return step(rf"\[stage: agent, iteration {iteration}\]{context}", times=times,
                structured={"entities": [{"name": n, "type": t} for n, t in entities], "relations": list(relations),
                            "source": source, **extra})


def validate(iteration: int | str, answer: str, *, context: str = "", times: int = 1) -> dict[str, Any]:
    return step(rf"\[stage: validator, iteration {iteration}\]{context}", times=times, content=answer)


def comment(iteration: int | str, error: str, reason: str = "", *, times: int = 1) -> dict[str, Any]:
    return step(rf"\[stage: commentor, iteration {iteration}\]", times=times,
                structured={"error_type": error, "reason": reason})


@pytest.fixture(scope="session")
def stark_root(tmp_path_factory) -> Path:
    """STaRK's released layout with small MAG, Amazon and PrimeKG datasets (:mod:`kgagents.evals.stark_fixture`)."""
    from kgagents.evals.stark_fixture import write_all

    return write_all(tmp_path_factory.mktemp("stark"))
