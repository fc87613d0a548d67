"""The Python Code Tool: runs LLM-written Python in the sandbox (KGoT paper, §3.3 and B.5).

Also used for KGoT's mathematical post-processing. Each run has its own tool instance and work directory.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from kgagents.core.config import Settings
from kgagents.tools.manager import ToolEnv, ToolStatus, register_tool
from kgagents.tools.sandbox import Sandbox, SandboxLimits, isolation_status


class RunPythonCodeInput(BaseModel):
    code: str = Field(description="Complete Python 3 code to run. Print every value you need to see; "
                                  "the printed output is returned.")


class RunPythonCodeTool(BaseTool):
    """Run Python code in an isolated sandbox and return what it printed (or the error)."""

    name: str = "run_python_code"
    description: str = (
        "Run Python 3 code in an isolated sandbox (no network, no files outside a scratch directory, time and "
        "memory limits) and return its printed output. Use it for calculations, data processing, sorting, "
        "counting, date arithmetic and checking logic. Always print the final result, e.g. "
        "`v = sorted([42, 23, 2]); print(v[1] + v[2])`. Installed packages (e.g. numpy, pandas, networkx, "
        "sympy) can be imported; nothing can be installed."
    )
    args_schema: type[BaseModel] = RunPythonCodeInput
    sandbox: Sandbox

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, code: str) -> str:  # pragma: no cover - the workflows call the async variant
        return self._format(self.sandbox.run_sync(code, result_var=None))

    async def _arun(self, code: str) -> str:
        return self._format(await self.sandbox.run(code, result_var=None))

    @staticmethod
    def _format(result) -> str:
        if result.ok:
            return result.stdout.strip() or "(the code ran and printed nothing; print the values you need)"
        out = f"Error: {result.error}"
        if result.stdout.strip():
            out += f"\nOutput before the error:\n{result.stdout.strip()}"
        return out


def make_python_tool(env: ToolEnv) -> RunPythonCodeTool:
    """The tool for one run, with a sandbox in the run's work directory."""
    limits = SandboxLimits(timeout_s=env.sandbox_timeout_s, memory_mb=env.sandbox_memory_mb,
                           quota=env.sandbox_quota)
    sandbox = Sandbox(Path(env.work_dir) / "python", limits, allow_weak=env.allow_weak_sandbox)
    return RunPythonCodeTool(sandbox=sandbox)


def check_python_tool(settings: Settings) -> ToolStatus:
    kind, detail = isolation_status()
    if kind == "bwrap":
        return ToolStatus("run_python_code", True, "available")
    if settings.allow_weak_sandbox:
        return ToolStatus("run_python_code", True, f"available with weak isolation ({detail})")
    return ToolStatus("run_python_code", False, f"missing service: {detail}")


register_tool(make_python_tool, name="run_python_code", check=check_python_tool)
