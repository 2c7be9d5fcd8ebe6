"""The GPU proof kit behind `tools/gpu-check`: which checks it makes, how each is bounded in
time, and how each is judged ([Validation](../docs/validation.md#the-gpu-proof-kit)).

Every section runs in processes of its own with a time cap (`SECTION_CAPS_S`), so that the
whole kit ends within its budget (`DEFAULT_BUDGET_S`) whatever hangs: the shipped suite
through `run-benchmarks`, the probes of `kscperf.worker.gpuprobe`, the `needs_cuda` tests
through pytest. Judging is pure functions over what the sections wrote, each giving `Check`s;
`kscperf.gpukit.gpureport` lays them out. Never imports torch: the device work happens in the
probes and workers.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from kscperf.errors import GOOD_STATUSES, CellStatus
from kscperf.orchestrator.workerenv import worker_environment
from kscperf.results.envinfo import now_iso

__all__ = ["EXIT_PASSED", "EXIT_FAILED", "EXIT_USAGE", "EXIT_NO_CUDA", "NO_CUDA_LINE",
           "AGREEMENT_TOLERANCE", "MEMORY_TOLERANCE", "FORK_MIN_SPEEDUP", "LAUNCH_BOUND_BUSY",
           "DEFAULT_BUDGET_S", "SECTION_CAPS_S", "CPU_SECTION_CAPS_S", "MEMORY_CELLS",
           "Status", "Check", "Report", "judge_agreement", "judge_memory", "judge_suite",
           "judge_fork_cost", "judge_tests", "cuda_handles", "cuda_tool_names", "Kit"]

# Exit statuses of tools/gpu-check: 0 every check passed (or was skipped with a reason),
# 1 a check failed, 2 bad usage, 3 no CUDA device here, so nothing was checked.
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CUDA = 0, 1, 2, 3
NO_CUDA_LINE = "no CUDA device: nothing to check"

# kscperf's wall and event times within ±10 % of do_bench (of Timer where do_bench cannot
# run), for workloads that are not launch-bound.
AGREEMENT_TOLERANCE = 0.10
# A workload is launch-bound when do_bench's device time (kernel alone) is under half of
# kscperf's event time per call: the device then idles between launches in a loop.
LAUNCH_BOUND_BUSY = 0.5
# kscperf's peak CUDA memory per config within ±5 % of a plain script's.
MEMORY_TOLERANCE = 0.05
# A forked worker at least 5x cheaper to start than a spawned one.
FORK_MIN_SPEEDUP = 5.0

# The time caps of the sections, seconds; the suite gets what the budget leaves. Their sum
# is the kit's bound: the default budget is under 8 minutes.
DEFAULT_BUDGET_S = 470.0
SECTION_CAPS_S = {"facts": 15.0, "agreement": 35.0, "memory": 45.0, "fork-cost": 50.0,
                  "tests": 80.0, "facts-after": 10.0}
# The CPU run's caps: its agreement is its only section, and it runs on machines that may be
# small and shared, where importing torch alone has taken over 15 s.
CPU_SECTION_CAPS_S = {**SECTION_CAPS_S, "facts": 60.0, "agreement": 120.0, "facts-after": 60.0}

# Cells whose peaks and teardown the memory section checks: (definition file, model); every
# one on pt_cuda, for inference, fwd and bwd (peaks against a plain script for the first two).
MEMORY_CELLS = (("bench_defs/relu3.py", "vrelu3"), ("bench_defs/gmm.py", "gmm"))
_PLAIN_TASKS = ("inference", "fwd")

ROOT = Path(__file__).resolve().parents[2]


class Status(enum.StrEnum):
    """How a check came out. `skip` always carries the reason (what is missing); `info`
    is a fact with no target."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    INFO = "info"


@dataclass(frozen=True)
class Check:
    """One line of the kit's output: a check's name, how it came out, one sentence of what
    was found, and the target it was held to."""

    name: str
    status: Status
    summary: str
    target: str = ""


@dataclass
class Report:
    """Everything one run of the kit found: the machine facts before and after, the checks
    in order, and the tables behind them (plain JSON rows per section)."""

    device: str
    started: str
    budget_s: float
    facts_before: dict[str, Any] = field(default_factory=dict)
    facts_after: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def exit_status(self) -> int:
        """`EXIT_FAILED` when any check failed, else `EXIT_PASSED`."""
        failed = any(c.status is Status.FAIL for c in self.checks)
        return EXIT_FAILED if failed else EXIT_PASSED

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: what the JSON report holds."""
        doc = asdict(self)
        doc["checks"] = [{**asdict(c), "status": c.status.value} for c in self.checks]
        doc["exit_status"] = self.exit_status
        return doc


# -- judging: pure functions over what the sections wrote ------------------------------------

def _ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference if value is not None and reference else None


def judge_agreement(rows: list[dict[str, Any]]) -> tuple[Check, list[dict[str, Any]]]:
    """Whether kscperf's wall and event times agree with do_bench (Timer where do_bench did
    not run) within `AGREEMENT_TOLERANCE` on every workload that is not launch-bound (as
    declared, or as do_bench shows against the event time), and the table of ratios."""
    table, worst, judged, missing = [], 0.0, [], []
    for row in rows:
        fig = {name: f.get("median_s") for name, f in row["figures"].items()}
        reference = "do_bench" if fig.get("do_bench") else "timer"
        busy = _ratio(fig.get("do_bench"), fig.get("kscperf_event"))
        launch = row["bound"] == "launch" or (busy is not None and busy < LAUNCH_BOUND_BUSY)
        ratios = {name: _ratio(fig.get(name), fig.get(reference))
                  for name in ("kscperf_wall", "kscperf_event", "timer")}
        table.append({"workload": row["workload"], "size": row["size"], "bound": row["bound"],
                      "launch_bound": launch, "reference": reference, **fig,
                      **{f"{k}_ratio": v for k, v in ratios.items()}})
        if launch:
            continue
        if fig.get(reference) is None or fig.get("kscperf_wall") is None:
            missing.append(row["workload"])
            continue
        judged.append(row["workload"])
        for name in ("kscperf_wall", "kscperf_event"):
            ratio = ratios[name]
            if ratio is not None:
                worst = max(worst, abs(ratio - 1.0))
    target = (f"within ±{AGREEMENT_TOLERANCE:.0%} of do_bench (Timer where do_bench cannot "
              "run) where not launch-bound")
    launch_bound = [t["workload"] for t in table if t["launch_bound"]]
    note = f"; launch-bound, reported only: {', '.join(launch_bound)}" if launch_bound else ""
    if missing or not judged:
        return Check("agreement", Status.FAIL, "no reference time for "
                     f"{', '.join(missing) or 'any workload'}{note}", target), table
    status = Status.PASS if worst <= AGREEMENT_TOLERANCE else Status.FAIL
    return Check("agreement", status, f"largest disagreement {worst:.1%} over "
                 f"{', '.join(judged)}{note}", target), table


def judge_memory(levels: list[dict[str, Any]], plain: list[dict[str, Any]]
                 ) -> tuple[list[Check], list[dict[str, Any]]]:
    """Two checks over the memory probes: `memory-peak`, kscperf's peak CUDA memory per
    config within `MEMORY_TOLERANCE` of the plain script's; `teardown`, the allocated
    memory after every config's teardown back at its level before the cell. And the table."""
    plain_by_cell = {(p["model"], p["task"]): p["peak_bytes"] for p in plain}
    table, worst, left, not_ok = [], 0.0, [], []
    for cell in levels:
        name = f"{cell['model']}/{cell['tool']}/{cell['task']}"
        if not cell["configs"]:
            not_ok.append(f"{name} ({cell['status']}: {cell['reason']})")
        peaks = plain_by_cell.get((cell["model"], cell["task"]), [])
        for i, c in enumerate(cell["configs"]):
            plain_peak = peaks[i] if i < len(peaks) else None
            ratio = _ratio(c["peak_cuda_bytes"], plain_peak)
            kept = c["allocated_after_bytes"] - cell["baseline_bytes"]
            table.append({"cell": name, "config": c["config"], "status": c["status"],
                          "kscperf_peak_bytes": c["peak_cuda_bytes"],
                          "plain_peak_bytes": plain_peak, "ratio": ratio,
                          "left_after_teardown_bytes": kept})
            if c["status"] != "ok":
                not_ok.append(f"{name}/{c['config']} ({c['status']}: {c['reason']})")
            if ratio is not None:
                worst = max(worst, abs(ratio - 1.0))
            if kept:
                left.append(f"{name}/{c['config']} {kept} bytes")
    compared = sum(r["ratio"] is not None for r in table)
    peak_ok = compared > 0 and worst <= MEMORY_TOLERANCE and not not_ok
    peak = Check("memory-peak", Status.PASS if peak_ok else Status.FAIL,
                 f"{compared} configs compared, largest difference {worst:.1%}"
                 + (f"; not ok: {'; '.join(not_ok)}" if not_ok else ""),
                 f"kscperf's peak within ±{MEMORY_TOLERANCE:.0%} of a plain script's")
    teardown_ok = bool(table) and not left and not not_ok
    teardown = Check("teardown", Status.PASS if teardown_ok else Status.FAIL,
                     f"{len(table)} configs over {len(levels)} cells, "
                     + (f"memory left: {'; '.join(left)}" if left else "no memory left"),
                     "allocated CUDA memory back at its level before the cell after "
                     "every config")
    return [peak, teardown], table


def judge_suite(cells: list[dict[str, Any]], planned: int | None, capped: bool
                ) -> tuple[Check, list[dict[str, Any]]]:
    """Whether every cell of the suite (entries of `kscperf.cells`) is ok, or skipped or
    unsupported with its reason; `planned` cells expected, `capped` when the run was
    stopped at its time cap. The table lists the cells that are not ok."""
    counts: dict[str, int] = {}
    table = []
    for c in cells:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
        if c["status"] != CellStatus.OK.value:
            table.append({"cell": "/".join(filter(None, (c["model"], c["tool"], c["task"],
                                                        c["config"]))),
                          "status": c["status"], "reason": c["reason"]})
    bad = [t for t in table if CellStatus(t["status"]) not in GOOD_STATUSES]
    unreasoned = [t for t in table if not t["reason"]]
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no cells"
    problems = []
    if bad:
        problems.append(f"{len(bad)} not ok")
    if unreasoned:
        problems.append(f"{len(unreasoned)} skipped without a reason")
    if capped:
        problems.append("stopped at its time cap before the end")
    if planned is not None and planned > len({(c["model"], c["tool"], c["task"])
                                              for c in cells}):
        problems.append(f"fewer cells than the {planned} planned")
    status = Status.FAIL if problems or not cells else Status.PASS
    return Check("suite", status, summary + (f" ({'; '.join(problems)})" if problems else ""),
                 "every CUDA cell ok, or skipped with a reason naming what is missing"), table


def judge_fork_cost(fork_s: float, spawn_s: float) -> Check:
    """Whether one more forked CUDA cell costs at least `FORK_MIN_SPEEDUP` times less than
    one more spawned one."""
    speedup = spawn_s / fork_s if fork_s > 0 else float("inf")
    status = Status.PASS if speedup >= FORK_MIN_SPEEDUP else Status.FAIL
    return Check("fork-cost", status, f"one more CUDA cell: fork {fork_s:.2f} s, spawn "
                 f"{spawn_s:.2f} s ({speedup:.1f}x)",
                 f"fork at least {FORK_MIN_SPEEDUP:.0f}x cheaper than spawn per cell")


def judge_tests(junit_xml: str) -> list[Check]:
    """One check per test case of a pytest JUnit XML file: passed, failed (with the first
    line of its message) or skipped (with its reason); one failed check when it has none."""
    checks = []
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        name = f"test {case.get('name')}"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            message = (failure.get("message") or failure.text or "failed").strip()
            checks.append(Check(name, Status.FAIL, message.splitlines()[0][:300]))
        elif skipped is not None:
            checks.append(Check(name, Status.SKIP, (skipped.get("message") or "").strip()))
        else:
            checks.append(Check(name, Status.PASS, "passed"))
    return checks or [Check("tests", Status.FAIL, "pytest collected no test")]


# -- facts about processes and tools, read without torch -------------------------------------

def cuda_handles(pid: int) -> list[str]:
    """The NVIDIA device files process `pid` holds open: what initialising CUDA (cuInit)
    leaves in a process, and what a forked child must not inherit (empty when it never
    did). The driver library merely loaded, without cuInit, opens none and is harmless."""
    found = []
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("/dev/nvidia"):
            found.append(target)
    return sorted(found)


def cuda_tool_names(definitions_dir: str) -> list[str]:
    """Every CUDA tool the definitions under `definitions_dir` can run: the CUDA twins of
    the built-ins and plug-ins, and the CUDA tools the models define for themselves."""
    from kscperf.names import split_device
    from kscperf.plan import cells as plan, definitions
    from kscperf.plan.plugins import plugin_tool_names

    models, _ = definitions.scan_models(definitions.find_definition_files([definitions_dir]))
    own = [t for m in models for t in m.tools]
    names = plan.all_tool_names(list(plugin_tool_names()), [t.name for t in own])
    cuda = [n for n in names if split_device(n)[1] == "cuda"]
    return list(dict.fromkeys(cuda + [t.name for t in own if t.cuda]))


# -- running the sections --------------------------------------------------------------------

# How long before its cap a process is asked to stop: a run then writes what it measured
# (it kills its worker and writes one file, in a second or two).
_TERM_GRACE_S = 10.0


class _SectionFailed(Exception):
    """A section's process failed or ran past its cap; the message says which and how."""


def _run_capped(argv: list[str], cap_s: float, cwd: Path = ROOT,
                env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str],
                                                             bool]:
    """Run `argv` (in environment `env`, None: this one) for at most `cap_s` seconds: near
    the cap it gets SIGTERM (so that a run writes what it measured), at the cap SIGKILL.
    Returns the process and whether it was capped."""
    grace = min(_TERM_GRACE_S, max(0.0, cap_s) / 2)
    proc = subprocess.Popen(argv, cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=max(0.5, cap_s - grace))
        return subprocess.CompletedProcess(argv, proc.returncode, out, err), False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=max(0.5, grace))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err), True


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _require_ok(results_path: Path) -> None:
    """_SectionFailed unless every cell of the results file ran ok: a skipped cell costs
    nothing and would make the comparison meaningless."""
    cells = json.loads(results_path.read_text(encoding="utf-8"))["kscperf"]["cells"]
    bad = [c for c in cells if c["status"] != CellStatus.OK.value]
    if bad or not cells:
        why = f"{bad[0]['status']}: {bad[0]['reason']}" if bad else "no cells"
        raise _SectionFailed(f"the cell timed for the start cost did not run ok ({why})")


class Kit:
    """One run of the kit on `device` ("cuda", or "cpu" for the parts that run there),
    writing its sections' files under `work_dir`, within `budget_s` seconds."""

    def __init__(self, device: str, work_dir: str, budget_s: float = DEFAULT_BUDGET_S,
                 python: str = sys.executable,
                 on_check: Callable[[Check], None] | None = None) -> None:
        self.device = device
        self.on_check = on_check
        self.work = Path(work_dir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.python = python
        self.t0 = time.perf_counter()
        self.report = Report(device=device, started=now_iso(), budget_s=budget_s)

    def probe(self, section: str, cap_s: float, *args: str) -> Any:
        """Run one `kscperf.worker.gpuprobe` section within `cap_s` and return what it wrote."""
        out = self.work / f"{section}-{time.monotonic_ns()}.json"
        # The workers' environment: with glibc's own mmap threshold the same elementwise op
        # cost 4x more in a probe than in Timer, beside it (docs/method.md, "The allocator").
        proc, capped = _run_capped([self.python, "-m", "kscperf.worker.gpuprobe", section,
                                    str(out), *args], cap_s, env=worker_environment())
        if capped:
            raise _SectionFailed(f"the {section} probe ran past its {cap_s:g} s cap")
        if proc.returncode != 0:
            raise _SectionFailed(f"the {section} probe exited {proc.returncode}: "
                                 f"{_tail(proc.stderr)}")
        return json.loads(out.read_text(encoding="utf-8"))

    def facts(self, cap_s: float) -> dict[str, Any]:
        """The machine facts on the kit's device ({"unavailable": why} if the probe failed)."""
        try:
            facts: dict[str, Any] = self.probe("facts", cap_s, "--device", self.device)
            return facts
        except _SectionFailed as exc:
            return {"unavailable": str(exc)}

    def left_s(self) -> float:
        """Seconds of the budget not yet spent."""
        return self.report.budget_s - (time.perf_counter() - self.t0)

    def add(self, checks: list[Check], table_name: str = "",
            table: list[dict[str, Any]] | None = None) -> None:
        """Record `checks` (and the table behind them), each told to `on_check`."""
        self.report.checks.extend(checks)
        for check in checks:
            if self.on_check is not None:
                self.on_check(check)
        if table_name:
            self.report.tables[table_name] = table or []

    def guarded(self, name: str, section: Any, *args: Any) -> None:
        """Run `section(*args)`; a section that fails to run is one failed check `name`."""
        try:
            section(*args)
        except _SectionFailed as exc:
            self.add([Check(name, Status.FAIL, str(exc))])

    def agreement(self, cap_s: float, scale: str = "full") -> None:
        """The timer-agreement section."""
        # On the CPU one thread: a shared machine's other tenants make torch's thread pool
        # wait on them, which no timer tells apart from the op.
        threads = ["--threads", "1"] if self.device == "cpu" else []
        rows = self.probe("agreement", cap_s, "--device", self.device, "--scale", scale,
                          *threads)
        check, table = judge_agreement(rows)
        self.add([check], "agreement", table)

    def memory(self, cap_s: float) -> None:
        """The memory section: kscperf's peaks and teardown levels, then the plain script's
        peaks, each probe in a fresh process."""
        cells = [{"module_path": str(ROOT / path), "model": model, "tool": "pt_cuda",
                  "task": task} for path, model in MEMORY_CELLS
                 for task in ("inference", "fwd", "bwd")]
        t0 = time.perf_counter()
        levels = self.probe("memory", cap_s * 0.6, "--cells", json.dumps(cells))
        plain_cells = [c for c in cells if c["task"] in _PLAIN_TASKS]
        plain = self.probe("plain-peak", cap_s - (time.perf_counter() - t0), "--cells",
                           json.dumps(plain_cells))
        checks, table = judge_memory(levels, plain)
        self.add(checks, "memory", table)

    def suite(self, cap_s: float) -> None:
        """The shipped suite at --fast on every CUDA tool, through `run-benchmarks`."""
        tools = cuda_tool_names(str(ROOT / "bench_defs"))
        out = self.work / "suite.json"
        t0 = time.perf_counter()
        listed, _ = _run_capped([self.python, "-m", "kscperf", "list", "--tools",
                                 ",".join(tools)], min(30.0, cap_s / 4))
        cap_s -= time.perf_counter() - t0
        # One line per planned cell on stdout (the count goes to stderr).
        planned = (sum(1 for line in listed.stdout.splitlines() if line.strip())
                   if listed.returncode == 0 else None)
        proc, capped = _run_capped([self.python, "-m", "kscperf", "--fast", "--tools",
                                    ",".join(tools), "-o", str(out), "--replace", "-q",
                                    "--build", "gpu-check"], cap_s)
        if not out.exists():
            raise _SectionFailed(f"run-benchmarks exited {proc.returncode} and wrote no "
                                 f"results{' (capped)' if capped else ''}: "
                                 f"{_tail(proc.stderr)}")
        cells = json.loads(out.read_text(encoding="utf-8"))["kscperf"]["cells"]
        check, table = judge_suite(cells, planned, capped)
        self.add([check], "suite", table)

    def fork_cost(self, cap_s: float, cells: int = 4) -> None:
        """What one more CUDA cell costs, fork against spawn: the wall time of runs of one
        and of `cells` worker processes of a trivial CUDA cell, as tools/harness-bench
        measures it on the CPU."""
        deadline = time.perf_counter() + cap_s
        costs: dict[str, float] = {}
        for isolation in ("fork", "spawn"):
            walls = []
            for n in (1, cells):
                left = deadline - time.perf_counter()
                t0 = time.perf_counter()
                proc, capped = _run_capped(
                    [self.python, "-m", "kscperf", str(ROOT / "tools" / "models" / "tiny.py"),
                     "--tools", "pt_cuda", "--tasks", "inference", "--processes", str(n),
                     "--values", "1", "--warmups", "0", "--min-time", "1e-6", "--isolation",
                     isolation, "-o", str(self.work / f"fork-{isolation}-{n}.json"),
                     "--replace", "-q", "--build", "fork-cost"], left)
                if capped or proc.returncode != 0:
                    raise _SectionFailed(f"the {isolation} run of {n} cells "
                                         f"{'ran past the cap' if capped else 'failed'}: "
                                         f"{_tail(proc.stderr)}")
                walls.append(time.perf_counter() - t0)
                _require_ok(self.work / f"fork-{isolation}-{n}.json")
            costs[isolation] = (walls[1] - walls[0]) / (cells - 1)
        self.add([judge_fork_cost(costs["fork"], costs["spawn"])], "fork_cost",
                 [{"isolation": k, "per_cell_s": v} for k, v in costs.items()])

    def tests(self, cap_s: float) -> None:
        """The `needs_cuda` tests, through pytest, one check each."""
        junit = self.work / "cuda-tests.xml"
        proc, capped = _run_capped([self.python, "-m", "pytest", "-m", "needs_cuda", "-q",
                                    "-p", "no:cacheprovider", f"--junitxml={junit}",
                                    str(ROOT / "tests")], cap_s)
        if capped or not junit.exists():
            raise _SectionFailed(f"pytest {'ran past its cap' if capped else 'exited '}"
                                 f"{'' if capped else proc.returncode}: {_tail(proc.stdout)}")
        self.add(judge_tests(str(junit)))

    def run(self) -> Report:
        """Every section in order, each within its cap, the suite within what the budget
        leaves; the report. Facts already read (`report.facts_before`) are not read again."""
        caps = SECTION_CAPS_S if self.device == "cuda" else CPU_SECTION_CAPS_S
        if not self.report.facts_before:
            self.report.facts_before = self.facts(caps["facts"])
        if self.device == "cuda":
            reserved = sum(v for k, v in caps.items() if k != "facts")
            self.guarded("suite", self.suite, max(30.0, self.left_s() - reserved))
        self.guarded("agreement", self.agreement, caps["agreement"],
                     "full" if self.device == "cuda" else "quick")
        if self.device == "cuda":
            self.guarded("memory", self.memory, caps["memory"])
            self.guarded("fork-cost", self.fork_cost, caps["fork-cost"])
            self.guarded("tests", self.tests, caps["tests"])
        else:
            self.add([Check(name, Status.SKIP, "needs a CUDA device") for name in
                      ("suite", "memory-peak", "teardown", "fork-cost", "tests")])
        self.report.facts_after = self.facts(caps["facts-after"])
        self.report.elapsed_s = time.perf_counter() - self.t0
        return self.report
