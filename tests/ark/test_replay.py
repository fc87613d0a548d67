"""``kgagents ask --record`` then ``kgagents replay``: ARK-V1 run again from its recording, with no model."""

from __future__ import annotations

import json
import re
import sqlite3

from kgagents.cli import main
from tests.ark import script as S


def _recorded_run(tmp_path, capsys, example):
    graph = tmp_path / "example.json"
    graph.write_text(json.dumps(example), encoding="utf-8")
    steps = S.yui_run(example["graph"])
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    runs = str(tmp_path / "runs")
    assert main(["--runs-dir", runs, "ask", "--workflow", "ark", example["question"], "--attach", str(graph),
                 "--model", f"scripted:{script}", "--quiet", "--record"]) == 0
    out, err = capsys.readouterr()
    thread = re.search(r"thread: (\S+)", err).group(1)
    assert out.strip() == "False" and "recorded 7 model exchange(s)" in err
    # the model is gone: a call that reached it would find no step to answer with
    script.write_text(json.dumps({"steps": []}), encoding="utf-8")
    # a recording chooses no path: the replay is given the attachment and the (file-reading) model again
    return runs, thread, ["--attach", str(graph), "--model", f"scripted:{script}"]


def test_a_recorded_run_replays_identically_without_its_model(tmp_path, capsys, example):
    runs, thread, inputs = _recorded_run(tmp_path, capsys, example)
    assert main(["--runs-dir", runs, "replay", thread, *inputs]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "False"
    assert "replayed 7 recorded exchange(s)" in err and "identical" in err
    assert main(["--runs-dir", runs, "show", f"{thread}-replay"]) == 0
    assert "(Sablé, animal breed, dachshund)" in capsys.readouterr().out
    assert main(["--runs-dir", runs, "replay", thread, *inputs]) == 0  # a second replay: a thread of its own
    assert f"{thread}-replay-2" in capsys.readouterr().err


def test_a_request_the_recording_lacks_stops_the_replay_with_its_node(tmp_path, capsys, example):
    runs, thread, inputs = _recorded_run(tmp_path, capsys, example)
    with sqlite3.connect(tmp_path / "runs" / "recordings" / f"{thread}.sqlite") as db:
        node = db.execute("SELECT node FROM exchanges WHERE node LIKE '%relation%' ORDER BY rowid LIMIT 1"
                          ).fetchone()[0]
        db.execute("DELETE FROM exchanges WHERE node = ? AND rowid = (SELECT MIN(rowid) FROM exchanges "
                   "WHERE node = ?)", (node, node))
    assert main(["--runs-dir", runs, "replay", thread, *inputs]) == 1
    err = capsys.readouterr().err
    assert "the recording has no reply for a request of node" in err and node.split(" / ")[0] in err


def test_replay_of_an_unknown_thread_is_a_clear_error(tmp_path, capsys):
    assert main(["--runs-dir", str(tmp_path), "replay", "nope"]) == 2
    assert "no recording for 'nope'" in capsys.readouterr().err
