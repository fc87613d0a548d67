"""Where imported graphs and runs live: a per-user data folder by default, KGAGENTS_HOME, or a project's own
``.kgagents`` folder once the user trusts that folder; never the user's real data folder during the tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kgagents.cli import main
from kgagents.core import config
from kgagents.core.config import data_home, get_settings, user_data_dir
from kgagents.tools.pgraph import graphs_dir


@pytest.fixture()
def no_home(monkeypatch, tmp_path):
    """No KGAGENTS_HOME / RUNS_DIR / GRAPHS_DIR: the defaults decide, in a fresh working directory."""
    for name in ("KGAGENTS_HOME", "KGAGENTS_RUNS_DIR", "KGAGENTS_GRAPHS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def test_the_test_suite_never_uses_the_real_data_folder():
    home = data_home()[0].resolve()
    assert os.environ["KGAGENTS_HOME"] and home == Path(os.environ["KGAGENTS_HOME"]).resolve()
    real = Path.home() / ".local" / "share"
    assert real.resolve() not in home.parents


def test_per_user_folder_by_default(no_home):
    assert data_home() == (no_home / "xdg" / "kgagents", "the per-user data folder")
    assert get_settings().runs_dir == no_home / "xdg" / "kgagents" / "runs"
    assert graphs_dir() == no_home / "xdg" / "kgagents" / "graphs"


def test_kgagents_home_overrides(no_home, monkeypatch):
    monkeypatch.setenv("KGAGENTS_HOME", str(no_home / "mine"))
    assert get_settings().runs_dir == no_home / "mine" / "runs"
    assert graphs_dir() == no_home / "mine" / "graphs"
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(no_home / "elsewhere"))
    assert get_settings().runs_dir == no_home / "elsewhere"  # one part alone still moves


def test_a_project_folder_opts_in_with_its_own_kgagents(no_home, monkeypatch, capsys):
    project = no_home / "project"
    (project / ".kgagents").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.setattr(config, "_snapshot", None)  # settings are read again when a variable changes
    # a .kgagents folder alone is not enough: the user trusts the folder once (someone else may have made it)
    assert data_home()[0] == no_home / "xdg" / "kgagents"
    assert "kgagents trust" in capsys.readouterr().err
    assert main(["trust"]) == 0
    monkeypatch.setattr(config, "_snapshot", None)
    assert data_home() == (project / ".kgagents", "this folder's .kgagents")
    assert get_settings().runs_dir == project / ".kgagents" / "runs"
    assert graphs_dir() == project / ".kgagents" / "graphs"
    monkeypatch.chdir(no_home)
    assert get_settings().runs_dir == project / ".kgagents" / "runs"  # absolute: the same place after a cd


@pytest.mark.parametrize("platform,variables,expected", [
    ("linux", {"XDG_DATA_HOME": "relative/ignored"}, "HOME/.local/share/kgagents"),
    ("darwin", {}, "HOME/Library/Application Support/kgagents"),
    ("win32", {"LOCALAPPDATA": "LOCAL"}, "LOCAL/kgagents"),
    ("win32", {}, "HOME/AppData/Local/kgagents"),
])
def test_platform_folders(monkeypatch, tmp_path, platform, variables, expected):
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setenv("HOME", str(tmp_path / "HOME"))
    monkeypatch.setenv("USERPROFILE", str(tmp_path / "HOME"))
    monkeypatch.delenv("LOCALAPPDATA", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, str(tmp_path / value) if value != "relative/ignored" else value)
    assert user_data_dir() == tmp_path / expected


def test_an_imported_graph_is_found_from_another_folder(no_home, monkeypatch, capsys):
    source = no_home / "work" / "kg.tsv"
    source.write_text("Alice\tknows\tBob\n", encoding="utf-8")
    assert main(["graph", "import", str(source), "--name", "people"]) == 0
    err = capsys.readouterr().err
    assert f"graphs directory: {(no_home / 'xdg' / 'kgagents' / 'graphs').resolve()}" in err
    assert "per-user data folder" in err and "--graph people" in err
    assert not (no_home / "work" / ".kgagents").exists()
    other = no_home / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    assert main(["graph", "list"]) == 0
    assert capsys.readouterr().out.startswith("people ")
