"""A local stand-in for a GitHub Actions runner, enough to run a workflow of examples/ for
real: its jobs in the order of `needs`, a matrix job once per value, each step's `run:`
script in bash as the runner runs it (`bash --noprofile --norc -eo pipefail`), with the
`${{ ... }}` expressions, `env`, `GITHUB_STEP_SUMMARY`, `GITHUB_OUTPUT`, step and job
outputs and `if:` conditions evaluated. `actions/checkout` copies the checkout, and
`actions/upload-artifact` and `actions/download-artifact` copy folders; no other action is
known, and a step using one fails the run.

Not a test module (pytest collects test_*.py only); imported by the test_*.py next to it.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# One token of an expression: a string literal, an operator, a parenthesis, a number, a
# status function or a dotted name (names may hold '-', as in strategy.job-total).
_TOKEN = re.compile(r"\s*('(?:[^']|'')*'|&&|\|\||==|!=|!|\(|\)|\d+|"
                    r"[A-Za-z_][\w-]*(?:\.[\w-]+)*(?:\(\))?)")
_STATUS_FUNCTIONS = ("always()", "cancelled()", "success()", "failure()")


@dataclass
class StepResult:
    name: str
    outcome: str                 # success, failure or skipped
    log: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class JobResult:
    name: str
    result: str                  # success, failure or skipped
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    def step(self, prefix: str) -> StepResult:
        """The step whose name starts with `prefix`."""
        return next(s for s in self.steps if s.name.startswith(prefix))

    def explain(self) -> str:
        """Every step's outcome and output, for a failed assertion."""
        return "\n".join(f"--- {self.name} / {s.name}: {s.outcome}\n{s.log}" for s in self.steps)


def evaluate(expression: str, context: dict[str, Any], failed: bool = False) -> Any:
    """The value of a GitHub Actions expression (without `${{ }}`): literals, names looked up
    in `context` ('' when missing), ==, !=, !, &&, || and the status functions, of a job
    that has `failed` so far and is never cancelled."""
    words: list[str] = []
    pos, text = 0, expression.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"cannot read the expression {expression!r} at {text[pos:]!r}")
        pos = m.end()
        token = m.group(1)
        if token.startswith("'"):
            words.append(repr(token[1:-1].replace("''", "'")))
        elif token in ("&&", "||", "!"):
            words.append({"&&": " and ", "||": " or ", "!": " not "}[token])
        elif token in ("==", "!=", "(", ")") or token.isdigit():
            words.append(token)
        elif token in _STATUS_FUNCTIONS:
            words.append(repr({"always()": True, "cancelled()": False,
                               "success()": not failed, "failure()": failed}[token]))
        else:
            value: Any = context
            for part in token.split("."):
                value = value.get(part, "") if isinstance(value, dict) else ""
            words.append(repr(value))
    return eval("".join(words), {"__builtins__": {}})   # only literals and operators remain


def substitute(text: str, context: dict[str, Any]) -> str:
    """`text` with every `${{ expression }}` replaced by its value."""
    def value(m: re.Match[str]) -> str:
        return _text(evaluate(m.group(1), context))
    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


def condition(text: Any, context: dict[str, Any], failed: bool) -> bool:
    """Whether an `if:` holds; without a status function, success() is implied."""
    if text is None:
        return not failed
    expr = str(text).strip()
    if expr.startswith("${{") and expr.endswith("}}"):
        expr = expr[3:-2]
    if not any(f in expr for f in _STATUS_FUNCTIONS):
        expr = f"success() && ({expr})"
    return bool(evaluate(expr, context, failed))


def job_order(jobs: dict[str, Any]) -> list[str]:
    """The jobs, each after every job it needs."""
    order: list[str] = []
    def visit(name: str) -> None:
        if name not in order:
            for need in _needs(jobs[name]):
                visit(need)
            order.append(name)
    for name in jobs:
        visit(name)
    return order


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs", [])
    return [needs] if isinstance(needs, str) else list(needs)


class Runner:
    """Runs one workflow run at a time: `run(number)` is the run of github.run_number
    `number`, its jobs' workspaces and artifacts under `root`/run-NUMBER."""

    def __init__(self, workflow: Path, checkout: Path, root: Path,
                 env: dict[str, str], overrides: dict[str, str],
                 matrices: dict[str, dict[str, list[Any]]] | None = None) -> None:
        self.doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
        for name, matrix in (matrices or {}).items():   # e.g. fewer shards than written
            self.doc["jobs"][name]["strategy"]["matrix"] = matrix
        self.checkout, self.root = checkout, root
        self.base_env, self.overrides = env, overrides

    def run(self, number: int) -> dict[str, JobResult]:
        """Every job of the workflow, as one run numbered `number`; the summary of the
        run is in `root`/run-NUMBER/summary.md."""
        run_dir = self.root / f"run-{number}"
        (run_dir / "artifacts").mkdir(parents=True)
        context: dict[str, Any] = {"github": {"run_number": number}, "needs": {}}
        env = {k: substitute(str(v), context) for k, v in self.doc.get("env", {}).items()}
        env.update(self.overrides)
        context["env"] = env
        results: dict[str, JobResult] = {}
        for name in job_order(self.doc["jobs"]):
            job = self.doc["jobs"][name]
            needed = {n: {"result": results[n].result, "outputs": results[n].outputs}
                      for n in _needs(job)}
            ctx = {**context, "needs": needed}
            needs_failed = any(v["result"] != "success" for v in needed.values())
            if not condition(job.get("if"), ctx, needs_failed):
                results[name] = JobResult(name, "skipped")
                continue
            results[name] = self._job(name, job, ctx, run_dir)
        return results

    def _job(self, name: str, job: dict[str, Any], context: dict[str, Any],
             run_dir: Path) -> JobResult:
        """A job, once per value of its matrix (one matrix variable at most)."""
        matrix = job.get("strategy", {}).get("matrix", {})
        if len(matrix) > 1:
            raise ValueError(f"job {name}: only a matrix of one variable is known here")
        key, values = next(iter(matrix.items())) if matrix else ("", [None])
        combined = JobResult(name, "success")
        for value in values:
            ctx = {**context, "matrix": {key: value} if key else {},
                   "strategy": {"job-total": len(values), "job-index": values.index(value)}}
            workspace = run_dir / "work" / (f"{name}-{value}" if key else name)
            part = self._steps(name, job, ctx, workspace, run_dir)
            combined.steps += part.steps
            combined.outputs.update(part.outputs)
            if part.result != "success":
                combined.result = "failure"
        return combined

    def _steps(self, name: str, job: dict[str, Any], context: dict[str, Any],
               workspace: Path, run_dir: Path) -> JobResult:
        workspace.mkdir(parents=True)
        env = {**context["env"], **{k: substitute(str(v), context)
                                    for k, v in job.get("env", {}).items()}}
        env = {**self.base_env, **env, "GITHUB_WORKSPACE": str(workspace), "CI": "true",
               "GITHUB_STEP_SUMMARY": str(run_dir / "summary.md")}
        ctx = {**context, "env": env, "steps": {}}
        result = JobResult(name, "success")
        for index, step in enumerate(job["steps"]):
            title = step.get("name") or step.get("uses") or f"step {index + 1}"
            if not condition(step.get("if"), ctx, result.result != "success"):
                outcome = StepResult(substitute(title, ctx), "skipped")
            else:
                outcome = self._step(step, substitute(title, ctx), ctx, env, workspace,
                                     run_dir)
            result.steps.append(outcome)
            if "id" in step:
                ctx["steps"][step["id"]] = {"outcome": outcome.outcome,
                                            "outputs": outcome.outputs}
            if outcome.outcome == "failure":
                result.result = "failure"
        result.outputs = {k: substitute(str(v), ctx) for k, v in job.get("outputs", {}).items()}
        return result

    def _step(self, step: dict[str, Any], title: str, ctx: dict[str, Any],
              env: dict[str, str], workspace: Path, run_dir: Path) -> StepResult:
        uses = str(step.get("uses", ""))
        with_ = {k: substitute(_text(v), ctx) for k, v in step.get("with", {}).items()}
        try:
            if uses.startswith("actions/checkout@"):
                shutil.copytree(self.checkout, workspace, dirs_exist_ok=True, symlinks=True)
            elif uses.startswith("actions/upload-artifact@"):
                _upload(workspace, run_dir / "artifacts" / with_["name"], with_)
            elif uses.startswith("actions/download-artifact@"):
                _download(run_dir / "artifacts", workspace, with_)
            elif uses:
                raise ValueError(f"no stand-in for the action {uses}")
            else:
                return _run_script(substitute(step["run"], ctx), title, env, workspace)
        except (OSError, ValueError, KeyError) as exc:
            return StepResult(title, "failure", f"{type(exc).__name__}: {exc}")
        return StepResult(title, "success")


def _text(value: Any) -> str:
    """A YAML value as the runner passes it to an action: booleans as true and false."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _run_script(script: str, title: str, env: dict[str, str], workspace: Path) -> StepResult:
    """A `run:` step in bash, as the runner runs `shell: bash`; its outputs from
    GITHUB_OUTPUT (NAME=VALUE lines)."""
    output = workspace.parent / f"{workspace.name}.output"
    output.write_text("")
    script_file = workspace.parent / f"{workspace.name}.step.sh"
    script_file.write_text(script)
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)],
                          cwd=workspace, env={**env, "GITHUB_OUTPUT": str(output)},
                          capture_output=True, text=True, timeout=900)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return StepResult(title, "success" if proc.returncode == 0 else "failure",
                      f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}", outputs)


def _upload(workspace: Path, artifact: Path, with_: dict[str, str]) -> None:
    """Copy the paths of an upload into the artifact, relative to their common folder, as
    upload-artifact roots them."""
    paths = [workspace / p.strip() for p in with_["path"].splitlines() if p.strip()]
    found = [p for p in paths if p.exists()]
    if not found and with_.get("if-no-files-found", "warn") == "error":
        raise ValueError(f"no files at {with_['path']!r} to upload")
    if not found:
        return
    root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in found]))
    for p in found:
        target = artifact / p.relative_to(root)
        if p.is_dir():
            shutil.copytree(p, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, target)


def _download(artifacts: Path, workspace: Path, with_: dict[str, str]) -> None:
    """Copy the artifacts matching `pattern` (or `name`) under `path`: all into it with
    merge-multiple, else each into a folder of its name."""
    pattern = with_.get("pattern") or with_["name"]
    matching = sorted(a for a in artifacts.iterdir() if fnmatch.fnmatch(a.name, pattern))
    if not matching:
        raise ValueError(f"no artifact matches {pattern!r}")
    merge = with_.get("merge-multiple", "false") == "true"
    for a in matching:
        target = workspace / with_.get("path", ".")
        shutil.copytree(a, target if merge else target / a.name, dirs_exist_ok=True)
