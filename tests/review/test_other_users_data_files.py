"""Review of issue 34 ("data folder 0700 and files 0600"): a data folder or SQLite file that belongs to another
user is used as it is, with a warning.

``kgagents.core.private`` leaves a folder or file of another user "as it is, with a warning" and goes on writing
into it. A runs folder in a shared place (``KGAGENTS_RUNS_DIR=/tmp/kgagents-runs``, a ``--runs-dir`` on a shared
disk, a trusted ``.kgagents`` that is a link into one) that someone else made first, with ``runs.sqlite`` /
``checkpoints.sqlite`` of theirs, mode 0666, receives the user's runs: questions, tool outputs, what every run
read -- readable by the other user. Refusing (or making files of one's own) would keep the claim.

Runs only as root (only root can make a file belong to another user here). It FAILS while the weakness is there.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from kgagents.cli import main

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="needs root to give files to another user")
NOBODY = 65534
QUESTION = "What is the secret project codename 7f3a?"


def test_checkpoints_go_into_another_users_world_readable_file(monkeypatch, tmp_path, capsys):
    shared = tmp_path / "shared-runs"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    os.chown(shared, NOBODY, NOBODY)
    for name in ("runs.sqlite", "checkpoints.sqlite"):
        planted = shared / name
        planted.touch()
        planted.chmod(0o666)
        os.chown(planted, NOBODY, NOBODY)
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(shared))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "z", "steps": [{"when": "", "content": "FINAL ANSWER: 4"}]}))
    main(["ask", "--workflow", "zeroshot", "--model", f"scripted:{script}", "--quiet", QUESTION])
    err = capsys.readouterr().err
    checkpoints = shared / "checkpoints.sqlite"
    info = checkpoints.stat()
    holds = QUESTION.encode() in checkpoints.read_bytes() or any(
        QUESTION.encode() in p.read_bytes() for p in shared.glob("checkpoints.sqlite*") if p.is_file())
    assert not (holds and (info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077)), (
        f"the run went into {checkpoints} (uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}); "
        f"kgagents said: {[line for line in err.splitlines() if 'another user' in line]}")
