"""The runner on a local Dask cluster of two worker processes on loopback, sharing the SQLite checkpointer."""

from __future__ import annotations

import json

import pytest

from evals.distributed import evaluate_distributed, local_cluster
from evals.runner import EvalOptions, read_results
from tests.evals.helpers import FAST, kgot_direct_steps, tiny_gaia

pytestmark = pytest.mark.slow


def test_items_are_spread_over_two_workers_and_resume(tmp_path):
    from distributed import Client

    answers = {f"Q{i}": str(2 * i) for i in range(8)}
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "dask", "steps": kgot_direct_steps(answers, fail={"Q5": "flaky"})}))
    values = {"model": f"scripted:{script}", **FAST}
    dataset = tiny_gaia(8)
    with local_cluster(n_workers=2, threads_per_worker=2) as cluster, Client(cluster) as client:
        assert all(addr.startswith("tcp://127.0.0.1:") for addr in client.scheduler_info()["workers"])
        options = EvalOptions(workflow="kgot", out_dir=tmp_path / "out", concurrency=2, progress=False,
                              context_values=values)
        result = evaluate_distributed(options, dataset, client=client)
        assert result.ran == 8 and result.failed == 1
        records = {r["id"]: r for r in result.records}
        assert "flaky" in records["t5"]["error"]
        assert all(records[f"t{i}"]["correct"] for i in range(8) if i != 5)
        assert len({r["worker"] for r in result.records}) == 2  # both worker processes ran items
        assert all(r["thread_id"] == f"tiny-{r['id']}-run0" for r in result.records)

        # Resuming through the cluster once the provider works again: the failed item continues from the
        # shared checkpoint, on whichever worker gets it.
        healthy = tmp_path / "healthy.json"
        healthy.write_text(json.dumps({"name": "healthy", "steps": kgot_direct_steps(answers)}))
        values = {**values, "model": f"scripted:{healthy}"}
        retry = evaluate_distributed(EvalOptions(workflow="kgot", out_dir=tmp_path / "out", concurrency=2,
                                                 progress=False, context_values=values, retry_failed=True),
                                     dataset, client=client)
        assert retry.ran == 1 and retry.skipped == 7 and retry.resumed == 1 and retry.failed == 0
    final = {r["id"]: r for r in read_results(tmp_path / "out")}
    assert final["t5"]["correct"] is True and final["t5"]["usage"]["scripted"]["calls"] == 5


def test_distributed_needs_plain_context_values(tmp_path):
    from nodes.context import Context

    with pytest.raises(ValueError, match="plain values"):
        evaluate_distributed(EvalOptions(workflow="kgot", out_dir=tmp_path, context=Context()), tiny_gaia(1))
