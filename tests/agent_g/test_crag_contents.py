"""Tables 5/7 need CRAG's knowledge graphs: an evaluation on CRAG's data whose graph module reads a CRAG API
without them (kgagents' server of 40 saved calls, a server that is down, none at all) is refused at the start
with a message that says how to get CRAG's mock API and data; on the sample that ships with kgagents it is a
warning. The probes are searches CRAG's mock API answers with its data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.cli.preflight import check_crag_api, crag_api_needed
from kgagents.core.config import ConfigurationError
from kgagents.tools.crag.contents import PROBES, contents_verdict
from kgagents.tools.crag_api import CragMockServer, default_calls_file
from tests.fakes import closed_port

SAMPLE = default_calls_file().parent / "dev_data.jsonl.bz2"  # the shipped sample, given as CRAG's own file


def calls_file(folder: Path, answered: int = len(PROBES)) -> Path:
    """A calls file whose server answers the first ``answered`` probes, as CRAG's mock API with its data does."""
    calls = [{"call": f"api.{name}({query!r})", "output_repr_truncated": repr([f"{query} (entity)"])}
             for name, query in PROBES[:answered]]
    path = folder / "calls.json"
    path.write_text(json.dumps({"calls": calls}), encoding="utf-8")
    return path


def test_the_verdict_on_the_probes_answers():
    names = [name for name, _ in PROBES]
    full = {name: ["x"] for name in names}
    assert contents_verdict("U", full, {}).state == "data"
    empty = contents_verdict("U", {name: [] for name in names}, {})
    assert empty.state == "empty" and "has no data" in empty.message and "git lfs pull" in empty.message
    assert "facebookresearch/CRAG" in empty.message and "CRAG_SERVER" in empty.message
    partial = contents_verdict("U", {**full, names[2]: None}, {})
    assert partial.state == "partial" and partial.empty == (names[2],) and names[2] in partial.message
    down = contents_verdict("U", {}, {name: "cannot be reached" for name in names})
    assert down.state == "unreachable" and "does not answer (cannot be reached)" in down.message
    assert contents_verdict("U", {**full, names[0]: {}}, {names[1]: "HTTP 404"}).empty == tuple(names[:2])


def test_which_runs_read_crags_api():
    assert crag_api_needed("agent-g", {}, "crag") and crag_api_needed("agent-g-react", {}, "crag")
    assert not crag_api_needed("agent-g-cot", {}, "crag") and not crag_api_needed("agent-g-text-rag", {}, "crag")
    assert not crag_api_needed("agent-g", {"graph": "g"}, "crag") and not crag_api_needed("agent-g", {}, "stark")
    assert check_crag_api("agent-g-text-rag", {}, dataset="crag", own_data=True) == []


def test_an_api_with_crags_data_passes_and_a_partial_one_is_a_warning(tmp_path):
    with CragMockServer(calls_file(tmp_path)) as kg:
        assert check_crag_api("agent-g", {"crag_api_url": kg.url}, dataset="crag", own_data=True) == []
    with CragMockServer(calls_file(tmp_path, answered=2)) as kg:
        notes = check_crag_api("agent-g", {"crag_api_url": kg.url}, dataset="crag", own_data=True)
    assert len(notes) == 1 and notes[0].startswith("warning: ") and PROBES[3][0] in notes[0]


def test_the_bundled_server_on_the_sample_is_a_warning_and_a_missing_api_on_crags_data_is_refused(monkeypatch):
    with CragMockServer() as kg:
        notes = check_crag_api("agent-g", {"crag_api_url": kg.url}, dataset="crag", own_data=False)
    assert len(notes) == 1 and "has no data" in notes[0] and "40 saved calls" in notes[0]
    monkeypatch.delenv("CRAG_SERVER", raising=False)
    with pytest.raises(ConfigurationError, match=r"none is given \(CRAG_SERVER or --set crag_api_url"):
        check_crag_api("agent-g-graph-rag", {}, dataset="crag", own_data=True)
    assert check_crag_api("agent-g-graph-rag", {}, dataset="crag", own_data=False) == []
    with pytest.raises(ConfigurationError, match="does not answer"):
        check_crag_api("agent-g", {"crag_api_url": f"http://127.0.0.1:{closed_port()}"}, dataset="crag",
                       own_data=True)


@pytest.mark.parametrize("workflow", ["agent-g", "agent-g-graph-rag"])
def test_eval_on_crags_data_against_the_bundled_server_is_refused(tmp_path, capsys, workflow):
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"steps": []}), encoding="utf-8")
    out = tmp_path / "out"
    with CragMockServer() as kg:
        url = kg.url
        code = main(["eval", workflow, "--dataset", "crag", "--data", str(SAMPLE), "--model", f"scripted:{model}",
                     "--limit", "1", "--out", str(out), "--no-progress", "--no-report",
                     "--set", f"crag_api_url={kg.url}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"refusing to evaluate {workflow}: the CRAG API at {url} has no data" in err
    assert "git lfs pull" in err and "uvicorn server:app" in err
    assert not (out / "results.jsonl").exists()


def test_an_embedding_model_that_cannot_be_loaded_is_refused_at_start(tmp_path, capsys):
    """The paper-crag preset's BAAI/bge-m3 where it is not downloaded (the tests run offline): refused before any
    item runs, instead of every item failing and being scored "missing"."""
    from kgagents.cli.preflight import local_embedders

    model = tmp_path / "model.json"
    model.write_text(json.dumps({"steps": []}), encoding="utf-8")
    out = tmp_path / "out"
    code = main(["eval", "agent-g-text-rag", "--dataset", "crag", "--preset", "paper-crag", "--model",
                 f"scripted:{model}", "--limit", "1", "--out", str(out), "--no-progress", "--no-report"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "agent-g-text-rag's embedding_model cannot be used, so no item could run" in err and "BAAI/bge-m3" in err
    assert not (out / "results.jsonl").exists()
    assert [s for s, _, _ in local_embedders("agent-g", {"embedding_model": "BAAI/bge-m3"})] == ["embedding_model"]
    assert [s for s, _, _ in local_embedders("agent-g", {"linking_model": "all-mpnet-base-v2"})] == ["linking_model"]
    assert local_embedders("agent-g", {"embedding_model": "openai:text-embedding-ada-002"}) == []
    assert local_embedders("agent-g", {}) == [] and local_embedders("kgot", {"embedding_model": "x"}) == []
