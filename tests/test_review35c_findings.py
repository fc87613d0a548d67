"""Review of issue 35 items 3, 4, 5, 9 and 11 (report rows, the grader setting, failed runs in GPT4Score,
re-scoring, exit codes and the data fingerprint): each test is one finding and fails on the code reviewed."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.evals.datasets import load_dataset
from kgagents.evals.grbench import FIXTURE_DIR
from kgagents.evals.judges import judge_of
from kgagents.evals.runner import data_fingerprint
from tests.fakes.openai_server import FakeOpenAIServer

KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "KGAGENTS_BASE_URL", "KGAGENTS_API_KEY",
        "KGAGENTS_GRADER_BASE_URL", "KGAGENTS_GRADER_API_KEY", "KGAGENTS_MODEL", "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION")
COMMON = ["--dataset", "grbench-fixture", "--domain", "amazon", "--ids", "amazon-0", "amazon-1", "amazon-2",
          "--no-progress", "--no-report"]


@pytest.fixture
def no_keys(monkeypatch):
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def script(path: Path, steps: list[dict]) -> str:
    path.write_text(json.dumps({"name": path.stem, "steps": steps}), encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture
def source(tmp_path, no_keys):
    """An evaluation's folder (3 answers, one failed run), judged by a scripted judge that says Yes."""
    run = script(tmp_path / "run.json", [
        {"when": r"Please help me judge", "times": 0, "content": "Yes"},
        {"when": r"Blackberry Playbook", "times": 0, "raise": "the model is down", "status": 400},
        {"when": r"Dolica DC-BP511", "times": 0, "content": "Dolica"},
        {"when": r"Samsung Galaxy S3", "times": 0, "content": "Samsung"}])
    folder = tmp_path / "source"
    assert main(["eval", "base", *COMMON, "--model", run, "--grader-model", run, "--set", "max_api_retries=0",
                 "--out", str(folder)]) == 0
    return folder


# ---------------------------------------------------------------------------------------------------------------
# Item 9: re-scoring
# ---------------------------------------------------------------------------------------------------------------


def test_rescore_with_estimate_estimates_and_calls_no_judge(source, tmp_path, capsys):
    """--estimate promises that no model is called; with --rescore it is ignored and the judge is paid."""
    strict = script(tmp_path / "strict.json", [{"when": r"Please help me judge", "times": 0, "content": "No"}])
    out = tmp_path / "estimated"
    assert main(["eval", "base", *COMMON, "--rescore", str(source), "--grader-model", strict, "--out", str(out),
                 "--estimate"]) == 0
    capsys.readouterr()
    assert not (out / "results.jsonl").exists(), "--estimate re-scored (and called the judge) instead of estimating"


def test_rescore_judge_server_is_not_chosen_by_the_folder(source, tmp_path, capsys, no_keys):
    """A results folder is data: its manifest's run model and base_url must not choose where the user's judge
    sends. A folder saying its run was openai:gpt-4o at the author's server gets GRBench's default judge sent
    there (the author's server then writes the GPT4Score the user reports as gpt-4o's)."""
    with FakeOpenAIServer(api_key="user-key") as openai, FakeOpenAIServer() as author:
        openai.reply("Yes").reply("Yes")
        manifest = json.loads((source / "manifest.json").read_text())
        manifest["context"] = {**manifest["context"], "model": "openai:gpt-4o", "base_url": author.base_url}
        (source / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        no_keys.setenv("OPENAI_API_KEY", "user-key")
        no_keys.setenv("OPENAI_BASE_URL", openai.base_url)  # the user's OpenAI endpoint (loopback in a test)
        main(["eval", "base", *COMMON, "--rescore", str(source), "--out", str(tmp_path / "rescored")])
        capsys.readouterr()
        assert author.requests == [], "the folder's author's server judged the user's re-scoring"


def test_rescore_leaves_the_source_checkpoints_byte_identical(source, tmp_path, capsys):
    """Re-scoring opens DIR's checkpoints read-write (setup: WAL mode, CREATE TABLE): a file in rollback-journal
    mode (copied, made by another SQLite tool) is rewritten, so DIR is not left as it was."""
    db = source / "checkpoints.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=DELETE").fetchall()
    conn.close()
    before = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    assert main(["eval", "base", *COMMON, "--rescore", str(source), "--grader-model", "none", "--out",
                 str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    after = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    assert after.keys() == before.keys() and after == before, "re-scoring wrote to DIR's checkpoints"


def test_rescore_a_link_beside_the_checkpoints_is_a_clear_error(source, tmp_path, capsys):
    """A folder from someone else with a link beside its checkpoints (checkpoints.sqlite-shm -> elsewhere): SQLite
    refuses it (nothing is written through the link) but the command ends in a traceback, not an error message."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    (source / "checkpoints.sqlite-shm").symlink_to(victim)
    code = main(["eval", "base", *COMMON, "--rescore", str(source), "--grader-model", "none", "--out",
                 str(tmp_path / "plain")])
    assert code != 0 and "checkpoints" in capsys.readouterr().err
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_rescore_default_out_folder_is_not_written_through_a_link(source, tmp_path, capsys):
    """The default output folder (DIR-rescored-SCORER-GRADER, beside DIR) is created with mkdir(exist_ok): a link
    of that name shipped beside a folder from someone else is followed and the results are written where it
    points."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "source-rescored-grbench-none").symlink_to(elsewhere)
    main(["eval", "base", *COMMON, "--rescore", str(source), "--grader-model", "none"])
    capsys.readouterr()
    assert list(elsewhere.iterdir()) == [], "the re-scoring wrote through a link"


def test_rescore_every_judgement_failed_exits_non_zero(source, tmp_path, capsys):
    """A re-scoring is only its judgements: when the judge answered none of them (a server that is down), the
    command says nothing was scored and exits 0 with GPT4Score n/a."""
    down = script(tmp_path / "down.json", [{"when": r"Please help me judge", "times": 0, "raise": "down",
                                            "status": 500}])
    out = tmp_path / "down"
    code = main(["eval", "base", *COMMON, "--rescore", str(source), "--grader-model", down, "--out", str(out)])
    capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gpt4score"] is None or summary["not judged"] == 2
    assert code != 0, "a re-scoring whose every judgement failed exits 0"


# ---------------------------------------------------------------------------------------------------------------
# Item 11: the data fingerprint
# ---------------------------------------------------------------------------------------------------------------


def test_data_fingerprint_does_not_depend_on_where_the_data_lies(tmp_path):
    """The fingerprint hashes each item's inputs, and GRBench's inputs are the absolute path of the graph: the same
    data in another folder (another checkout, another machine) has another fingerprint, and an evaluation made
    there cannot be re-scored here ("has in another version"); a graph whose contents changed keeps it."""
    copy = tmp_path / "fixture"
    shutil.copytree(FIXTURE_DIR, copy)
    here = load_dataset("grbench-fixture", None, split="amazon")
    there = load_dataset("grbench-fixture", str(copy), split="amazon")
    assert data_fingerprint(here) == data_fingerprint(there)


# ---------------------------------------------------------------------------------------------------------------
# Item 4: the grader setting
# ---------------------------------------------------------------------------------------------------------------


def test_an_azure_judge_never_gets_the_openai_key(tmp_path, capsys, no_keys):
    """OPENAI_API_KEY is bound to OpenAI's API (or OPENAI_BASE_URL). --grader-model azure_openai:gpt-4o builds
    langchain's AzureChatOpenAI, which reads OPENAI_API_KEY itself and sends it to AZURE_OPENAI_ENDPOINT."""
    run = script(tmp_path / "run.json", [{"when": r"Dolica DC-BP511", "times": 0, "content": "Dolica"}])
    with FakeOpenAIServer() as azure:
        no_keys.setenv("OPENAI_API_KEY", "sk-user-openai-key")
        no_keys.setenv("AZURE_OPENAI_ENDPOINT", azure.base_url.removesuffix("/v1"))
        no_keys.setenv("OPENAI_API_VERSION", "2024-02-01")
        main(["eval", "base", "--dataset", "grbench-fixture", "--domain", "amazon", "--ids", "amazon-0", "--model",
              run, "--grader-model", "azure_openai:gpt-4o", "--set", "max_api_retries=0", "--out",
              str(tmp_path / "out"), "--no-progress", "--no-report"])
        capsys.readouterr()
        leaked = [r for r in azure.requests if "sk-user-openai-key" in json.dumps(r.headers)]
        assert leaked == [], "OPENAI_API_KEY went to the Azure endpoint"


def test_a_judge_of_another_provider_is_not_shown_at_the_run_s_server():
    """A provider other than openai/anthropic/ollama (google_genai, mistralai, groq, ...) is taken for a bare name:
    the start line and the manifest say its requests go to KGAGENTS_BASE_URL, while its client sends them to its
    provider."""
    env = {"KGAGENTS_BASE_URL": "http://127.0.0.1:8000/v1"}
    judge = judge_of("grbench", "google_genai:gemini-1.5-pro", "m", env=env)
    assert judge is not None and judge.base_url != "http://127.0.0.1:8000/v1", judge


# ---------------------------------------------------------------------------------------------------------------
# Item 3: report rows; item 5 in the per-difficulty table
# ---------------------------------------------------------------------------------------------------------------

PRESET = {"strategy": "cot", "interaction": "agent", "max_depth": 10, "model": "openai:gpt-4o-mini"}


def results_dir(path, *, split, context=PRESET, judge="openai:gpt-4o at https://api.openai.com/v1", records=None):
    path.mkdir(parents=True)
    manifest = {"workflow": "grounded", "dataset": "grbench", "split": split, "runs": 1, "seed": None, "items": 2,
                "scorer": "grbench", "group_label": "Template", "preset": "paper-graph-cot", "context": context,
                "models": {"reasoner": context["model"]}, "grader_model": None, "judge": judge,
                "data": "0123456789abcdef"}
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    records = records or [{"id": f"{split}-{i}", "run": 0, "question": "q", "gold": "g", "answer": "a",
                           "group": "template 0", "correct": True, "cost_usd": 0.0, "wall_s": 1.0, "error": None,
                           "details": {"rouge_l": 1.0, "gpt4score": 1, "judge": "openai:gpt-4o",
                                       "difficulty": "easy"}} for i in range(2)]
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def section(report: str, marker: str) -> list[str]:
    part = report.split(marker)[1].split("##")[0]
    return [line for line in part.splitlines() if line.startswith("| ") and not line.startswith("| method")]


def report_of(tmp_path, dirs, *extra):
    out = tmp_path / "report"
    assert main(["report", *map(str, dirs), "--out", str(out), "--no-plots", *extra]) == 0
    return (out / "report.md").read_text()


def test_one_label_for_one_evaluation_s_domains_is_one_row(tmp_path, capsys):
    """report --label names rows, but the same label for an evaluation's two domains (one DIR each) gives two
    rows, each suffixed with its folder: the labels are made unique per DIR before the rows are formed."""
    dblp = results_dir(tmp_path / "dblp", split="dblp")
    amazon = results_dir(tmp_path / "amazon", split="amazon")
    report = report_of(tmp_path, [dblp, amazon], "--label", "mine", "--label", "mine")
    capsys.readouterr()
    rows = section(report, "as the paper's Table 1")
    assert len(rows) == 1 and rows[0].startswith("| mine |"), rows


def test_a_context_seed_is_a_setting_of_the_row(tmp_path, capsys):
    """evaluation_settings flattens context values and the manifest's keys into one namespace: the manifest's seed
    (None) overwrites the context's seed, so runs with --set seed=1 and --set seed=2 become one row."""
    one = results_dir(tmp_path / "one", split="dblp", context={**PRESET, "seed": 1})
    two = results_dir(tmp_path / "two", split="amazon", context={**PRESET, "seed": 2})
    report = report_of(tmp_path, [one, two])
    capsys.readouterr()
    assert len(section(report, "as the paper's Table 1")) == 2


def test_another_judge_server_is_another_row(tmp_path, capsys):
    """The row key has the grader's model (grader_model, None for the default) but not where it judged (the
    manifest's judge): GPT-4o on OpenAI and 'gpt-4o' on a local server become one row."""
    api = results_dir(tmp_path / "api", split="dblp")
    local = results_dir(tmp_path / "local", split="amazon", judge="openai:gpt-4o at http://127.0.0.1:8000/v1")
    report = report_of(tmp_path, [api, local])
    capsys.readouterr()
    assert len(section(report, "as the paper's Table 1")) == 2


def test_an_old_folder_s_failed_runs_count_in_the_per_difficulty_table(tmp_path, capsys):
    """A failed run written before score_failed has no details (no difficulty): Table 1 counts it 0, the Figure 14
    table silently leaves it out (easy: 100 over n=2 while the folder has 3 runs)."""
    judged = [{"id": f"dblp-{i}", "run": 0, "question": "q", "gold": "g", "answer": "g", "group": "template 0",
               "correct": True, "cost_usd": 0.0, "wall_s": 1.0, "error": None,
               "details": {"rouge_l": 1.0, "gpt4score": 1, "judge": "openai:gpt-4o", "difficulty": "easy"}}
              for i in range(2)]
    failed = {"id": "dblp-2", "run": 0, "question": "q", "gold": "g", "answer": None, "group": "template 0",
              "correct": False, "cost_usd": 0.0, "wall_s": 1.0, "error": "the model is down", "details": {}}
    folder = results_dir(tmp_path / "old", split="dblp", records=[*judged, failed])
    report = report_of(tmp_path, [folder])
    capsys.readouterr()
    [row] = section(report, "as the paper's Table 1")
    assert "66.67 (66.67)" in row, row
    figure = report.split("as the paper's Figure 14")[1].split("##")[0]
    assert "n=3" in figure or "failed" in figure, figure


def test_grader_base_url_flag_with_the_grader_key_is_not_left_unjudged(tmp_path, capsys, no_keys):
    """--grader-base-url names the grader's server, KGAGENTS_GRADER_API_KEY is its key, but the key is bound only
    to KGAGENTS_GRADER_BASE_URL: the flag's server gets no key, answers 401, and every answer ends "not judged"
    with exit 0 and nothing said at the start (the issue's "checked at start")."""
    run = script(tmp_path / "run.json", [{"when": r"Dolica DC-BP511", "times": 0, "content": "Dolica"}])
    with FakeOpenAIServer(api_key="judge-key") as judge:
        judge.reply("Yes")
        no_keys.setenv("KGAGENTS_GRADER_API_KEY", "judge-key")
        out = tmp_path / "out"
        code = main(["eval", "base", "--dataset", "grbench-fixture", "--domain", "amazon", "--ids", "amazon-0",
                     "--model", run, "--grader-model", "openai:gpt-4o", "--grader-base-url", judge.base_url, "--set",
                     "max_api_retries=0", "--out", str(out), "--no-progress", "--no-report"])
        capsys.readouterr()
    judged = [json.loads(line)["details"].get("gpt4score") for line in
              (out / "results.jsonl").read_text().splitlines()] if (out / "results.jsonl").exists() else []
    assert code != 0 or judged == [1], (code, judged)
