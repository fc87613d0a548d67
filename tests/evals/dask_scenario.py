"""Run by tests/evals/test_distributed.py in a child process, so that the Dask cluster's processes (and
multiprocessing's resource tracker) live and die with that child, not with the test session.

    python -m tests.evals.dask_scenario TMP_DIR   ->  prints a JSON summary on its last line
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.evals.helpers import FAST, kgot_direct_steps, tiny_gaia


def main(tmp: Path) -> dict:
    from distributed import Client

    from kgagents.evals.distributed import evaluate_distributed, local_cluster
    from kgagents.evals.runner import EvalOptions, read_results

    answers = {f"Q{i}": str(2 * i) for i in range(8)}
    script = tmp / "script.json"
    script.write_text(json.dumps({"name": "dask", "steps": kgot_direct_steps(answers, fail={"Q5": "flaky"})}))
    dataset = tiny_gaia(8)
    out: dict = {}
    with local_cluster(n_workers=2, threads_per_worker=2) as cluster, Client(cluster) as client:
        out["workers"] = sorted(client.scheduler_info()["workers"])
        first = evaluate_distributed(EvalOptions(workflow="kgot", out_dir=tmp / "out", concurrency=2, progress=False,
                                                 context_values={"model": f"scripted:{script}", **FAST}),
                                     dataset, client=client)
        out["first"] = {"ran": first.ran, "failed": first.failed, "records": first.records}
    # once the provider works again (the same model, new worker processes), the failed item resumes from the
    # shared checkpoint on any worker
    script.write_text(json.dumps({"name": "dask", "steps": kgot_direct_steps(answers)}))
    with local_cluster(n_workers=2, threads_per_worker=2) as cluster, Client(cluster) as client:
        retry = evaluate_distributed(EvalOptions(workflow="kgot", out_dir=tmp / "out", concurrency=2, progress=False,
                                                 context_values={"model": f"scripted:{script}", **FAST},
                                                 retry_failed=True), dataset, client=client)
        out["retry"] = {"ran": retry.ran, "skipped": retry.skipped, "resumed": retry.resumed, "failed": retry.failed}
    out["final"] = read_results(tmp / "out")
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
