"""How long the command line takes to start: ``kgagents --help`` and each ``kgagents COMMAND --help``.

Each command runs in a fresh interpreter (``python -m kgagents.cli ...``), ``--repeat`` times, interleaved with
``python -c pass`` so that both meet the same load; the table gives the median of each and their ratio, which
is what to compare across machines (docs/evals.md).

    python evals/bench_cli_start.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

COMMANDS: list[list[str]] = [
    [], ["ask"], ["ask", "--workflow", "grounded"], ["ask", "--workflow", "agent-g"], ["ask", "--workflow", "ark"],
    ["eval"], ["eval", "kgot"], ["resume"], ["runs"], ["show"], ["demo"], ["workflows"], ["tools"], ["report"],
    ["graph"], ["doctor"], ["clean"], ["trust"], ["agent-g"], ["replay"],
]


def _seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (the median is shown)")
    args = parser.parse_args()
    base = [sys.executable, "-c", "pass"]
    print(f"# {platform.node() or 'machine'}: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, Python {platform.python_version()}")
    print(f"{'command':45} {'median s':>9} {'python -c pass':>15} {'ratio':>7}")
    for command in COMMANDS:
        cli, bare = [], []
        for _ in range(args.repeat):
            bare.append(_seconds(base))
            cli.append(_seconds([sys.executable, "-m", "kgagents.cli", *command, "--help"]))
        shown = " ".join(["kgagents", *command, "--help"])
        median, floor = statistics.median(cli), statistics.median(bare)
        print(f"{shown:45} {median:9.3f} {floor:15.3f} {median / floor:7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
