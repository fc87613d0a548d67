"""Compute the cases of ``stark_metric_vectors.json`` with STaRK's own evaluator, under the installed
torchmetrics.

    python tests/agent_g/data/make_stark_metric_vectors.py STARK_EVALUATOR_PY OUT_JSON

``STARK_EVALUATOR_PY`` is ``stark_qa/evaluator.py`` of a checkout of snap-stanford/stark (the vectors in this
folder were made from commit ``b246b9490b1dc216892ce78303140014506932c1``); it is loaded by path, so only
torch and torchmetrics are needed. Run it once per torchmetrics version: each run adds that version's results
to the file (``expected[<torchmetrics version>]``), keeping the others. The cases are defined here; what they
expect is whatever STaRK's ``Evaluator.evaluate(pred_dict, answer_ids, metrics)`` returns for them. """

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

METRICS = ["mrr", "hit@1", "hit@5", "recall@20"]


def rank(ids: list[int]) -> list[list[float]]:
    """A ranking as the prediction dict Agent-G's scorer stands it for: scores n, n-1, ..., 1."""
    return [[i, float(len(ids) - n)] for n, i in enumerate(ids)]


def cases() -> list[dict]:
    rng = random.Random(0)
    out = [
        {"name": "gold first", "candidates": list(range(10)), "pred": rank([3, 1, 4]), "answer_ids": [3]},
        {"name": "gold second of a short ranking", "candidates": list(range(10)), "pred": rank([5, 2]),
         "answer_ids": [2]},
        {"name": "short ranking, gold unranked, 10 candidates", "candidates": list(range(10)), "pred": rank([7, 8]),
         "answer_ids": [2]},
        {"name": "short ranking, gold unranked, 30 candidates", "candidates": list(range(30)), "pred": rank([7, 8]),
         "answer_ids": [2, 25]},
        {"name": "short ranking, gold unranked, 100 candidates", "candidates": list(range(100)),
         "pred": rank([70, 8, 9]), "answer_ids": [74]},
        {"name": "one ranked id, gold unranked, 5000 candidates", "candidates": {"range": [0, 5000]},
         "pred": rank([4321]), "answer_ids": [1666, 3333]},
        {"name": "ties in the run's scores", "candidates": list(range(12)),
         "pred": [[1, 0.5], [2, 0.5], [3, 0.5], [4, 0.25]], "answer_ids": [3]},
        {"name": "ties across many candidates", "candidates": list(range(40)),
         "pred": [[i, 1.0] for i in range(0, 40, 2)], "answer_ids": [38, 39]},
        {"name": "candidates filtered: ranked and gold ids outside them", "candidates": [2, 4, 6, 8, 10],
         "pred": rank([3, 5, 6, 4]), "answer_ids": [5, 4]},
        {"name": "every gold outside the candidates", "candidates": [2, 4, 6], "pred": rank([2, 4]),
         "answer_ids": [3]},
        {"name": "negative similarity scores", "candidates": list(range(8)),
         "pred": [[1, -0.1], [2, -0.2], [5, -0.3]], "answer_ids": [5, 6]},
        {"name": "scores around zero", "candidates": list(range(8)), "pred": [[1, 0.4], [2, 0.0], [5, -0.3]],
         "answer_ids": [2, 7]},
        {"name": "recall at 20 of a long ranking", "candidates": list(range(60)), "pred": rank(list(range(59, 9, -1))),
         "answer_ids": [59, 45, 40, 39, 20, 3]},
        {"name": "gold at rank 6", "candidates": list(range(30)), "pred": rank([11, 12, 13, 14, 15, 16, 17]),
         "answer_ids": [16]},
        {"name": "scores above one: the unranked stay above zero", "candidates": list(range(12)),
         "pred": [[3, 2.5], [4, 1.75], [5, 1.5]], "answer_ids": [0, 5]},
    ]
    for n in range(6):  # random rankings over random candidate sets
        size = rng.choice([15, 50, 200, 1000])
        candidates = sorted(rng.sample(range(size * 2), size))
        ranked = rng.sample(candidates + rng.sample(range(size * 2), 3), rng.randint(1, min(40, size)))
        gold = rng.sample(candidates, rng.randint(1, 4)) + ([size * 2 + 1] if n % 3 == 0 else [])
        gold = [g for g in gold if g <= max(candidates)]
        out.append({"name": f"random {n}", "candidates": candidates, "pred": rank(list(dict.fromkeys(ranked))),
                    "answer_ids": gold or [candidates[0]]})
    return out


def expand(candidates) -> list[int]:
    if isinstance(candidates, dict):
        return list(range(*candidates["range"]))
    return list(candidates)


def main(evaluator_py: str, out_json: str) -> None:
    import torch
    import torchmetrics  # pyright: ignore[reportMissingImports]  (not a dependency: run by hand)

    spec = importlib.util.spec_from_file_location("stark_evaluator", evaluator_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = Path(out_json)
    data = json.loads(path.read_text()) if path.is_file() else {"cases": cases()}
    data["made_with"] = {**data.get("made_with", {}), torchmetrics.__version__: {"torch": torch.__version__}}
    for case in data["cases"]:
        evaluator = module.Evaluator(expand(case["candidates"]))
        pred_dict = {int(i): float(s) for i, s in case["pred"]}
        result = evaluator.evaluate(pred_dict, torch.LongTensor(case["answer_ids"]), metrics=METRICS)
        case.setdefault("expected", {})[torchmetrics.__version__] = {k: round(v, 6) for k, v in result.items()}
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(data['cases'])} cases with torchmetrics {torchmetrics.__version__} in {path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
