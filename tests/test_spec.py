"""Tests of kscperf.spec's `WorkerSettings`: each run setting is declared once, and what a
run is asked (`RunConfig`, from keywords or from the command line) is what every worker's
spec says. The launcher is the seam: a recording one reads each spec file the scheduler
wrote (no worker runs; what a worker does with its spec is tested in test_worker.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kscperf import cli
from kscperf.errors import KscperfError
from kscperf.orchestrator import schedule
from kscperf.orchestrator.launch import LaunchOutcome
from kscperf.orchestrator.session import RunConfig, select_cells
from kscperf.plan import cells as plan
from kscperf.spec import CellSpec, WorkerSettings

TOY = str(Path(__file__).parent / "fixtures" / "defs" / "toy.py")


class RecordingLauncher:
    """Reads every spec it is given; each worker "crashes" at once without running."""

    name = "recording"

    def __init__(self) -> None:
        self.specs: list[CellSpec] = []
        self.limits: list[tuple[float | None, int | None]] = []

    def launch(self, spec_path: str, result_path: str, log_path: str,
               timeout_s: float | None, max_rss_bytes: int | None = None) -> LaunchOutcome:
        with open(spec_path, encoding="utf-8") as fp:
            self.specs.append(CellSpec.from_dict(json.load(fp)))
        self.limits.append((timeout_s, max_rss_bytes))
        Path(log_path).write_text("")
        return LaunchOutcome(exit_code=1, signal=None, timed_out=False, wall_s=0.0)

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


# A value other than the default for every setting.
CHANGED = dict(seed=7, check_only=True, tool_plugins=("x=kscperf_onnx:tool",),
               compile_cache="cold", jacobian_max_elements=12, affinity=(0,),
               isolation="spawn", timeout_s=33.0, max_rss_bytes=1 << 30, explain=True)


def test_the_changed_values_cover_every_setting() -> None:
    names = {f.name for f in dataclasses.fields(WorkerSettings)}
    assert set(CHANGED) == names
    defaults = WorkerSettings()
    assert all(getattr(defaults, k) != v for k, v in CHANGED.items())


def scheduled_specs(config: RunConfig) -> RecordingLauncher:
    selection = select_cells(dataclasses.replace(config, tool_plugins=()))
    cells = [c for c in selection.cells if not c.skip_reason]
    _, profile = config.timing_profile()
    launcher = RecordingLauncher()
    schedule.run_cells(plan.plan_rounds(cells, profile.processes),
                       config.run_options(profile), launcher)
    return launcher


def test_every_setting_reaches_every_workers_spec() -> None:
    config = RunConfig(paths=(TOY,), tools="pt", tasks="fwd,bwd", **CHANGED)
    launcher = scheduled_specs(config)
    assert len(launcher.specs) == 2
    for spec in launcher.specs:
        assert spec.worker_settings() == config.worker_settings()
    assert launcher.limits == [(33.0, 1 << 30)] * 2


def test_the_command_line_sets_the_same_settings() -> None:
    args = cli.build_parser().parse_args([
        "run", TOY, "--seed", "7", "--compile-cache", "cold", "--jacobian-max-elements", "12",
        "--affinity", "0", "--isolation", "spawn", "--timeout", "33", "--max-rss",
        str(1 << 30), "--tool-plugin", "x=kscperf_onnx:tool", "--explain"])
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items()}
    for name, value in CHANGED.items():
        if name != "check_only":  # set by the subcommand, not by an option
            assert given[name] == value, name


def test_defaults_come_from_worker_settings() -> None:
    args = vars(cli.build_parser().parse_args(["run", TOY]))
    defaults = WorkerSettings()
    for f in dataclasses.fields(WorkerSettings):
        if f.name != "check_only":
            given = args[f.name]
            assert (tuple(given) if isinstance(given, list) else given) == \
                getattr(defaults, f.name), f.name
    assert RunConfig().worker_settings() == defaults.worker_settings()


@pytest.mark.parametrize("field, value", [("isolation", "thread"), ("compile_cache", "hot"),
                                          ("profile", "slow")])
def test_a_bad_choice_is_one_sentence_naming_it(field: str, value: str) -> None:
    with pytest.raises(KscperfError, match=f"^{field} '{value}' is not one of "):
        RunConfig(**{field: value})


def test_a_spec_keeps_its_settings_through_json() -> None:
    spec = CellSpec(model="toy", tool="pt", task="fwd", module_path=TOY, **CHANGED)
    assert CellSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
