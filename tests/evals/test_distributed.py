"""The runner on a local Dask cluster of two worker processes on loopback, sharing the SQLite checkpointer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kgagents.evals.distributed import evaluate_distributed
from kgagents.evals.runner import EvalOptions
from tests.evals.helpers import tiny_gaia

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_items_are_spread_over_two_workers_and_resume(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tests.evals.dask_scenario", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["workers"]) == 2 and all(w.startswith("tcp://127.0.0.1:") for w in out["workers"])

    first = out["first"]
    assert first["ran"] == 8 and first["failed"] == 1
    records = {r["id"]: r for r in first["records"]}
    assert "flaky" in records["t5"]["error"]
    assert all(records[f"t{i}"]["correct"] for i in range(8) if i != 5)
    assert len({r["worker"] for r in first["records"]}) == 2  # both worker processes ran items
    assert all(r["thread_id"] == f"tiny-{r['id']}-run0" for r in first["records"])

    assert out["retry"] == {"ran": 1, "skipped": 7, "resumed": 1, "failed": 0}
    final = {r["id"]: r for r in out["final"]}
    assert final["t5"]["correct"] is True and final["t5"]["resumed"] is True
    assert final["t5"]["usage"]["scripted"]["calls"] == 5  # the votes before the failure were not asked again


def test_distributed_needs_plain_context_values(tmp_path):
    from kgagents.nodes.kgot import KGoTContext

    with pytest.raises(ValueError, match="plain values"):
        evaluate_distributed(EvalOptions(workflow="kgot", out_dir=tmp_path, context=KGoTContext()), tiny_gaia(1))
