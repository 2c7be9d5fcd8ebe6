"""The dashboard leads with what changed (`kscperf.views.dashboard`, `kscperf.views.dashboard_timeline`):
open changes before the tools x tasks summary, tools that never ran folded into one line, a
benchmark's chained lockstep timeline beside its raw levels, and a run of machine-speed
events as one entry. Real stores of synthetic results files, real pages."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import synthetic
from kscperf import api
from kscperf.errors import CellStatus

SMALL: dict[str, Any] = dict(models=("vrelu3",), tools=("pt", "compiled"), tasks=("fwd",),
                             configs=("1024",), processes=3)


def _text(page: Path) -> str:
    body = re.sub(r"<(svg|style|script).*?</\1>", " ", page.read_text(), flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _md(i: int) -> dict[str, Any]:
    return {"date": f"2024-05-{i + 1:02d}T12:00:00", "git_commit": f"{i:04d}" + "c" * 36}


def test_the_front_page_opens_with_changes_and_folds_tools_that_never_ran(
        tmp_path: Path) -> None:
    never = lambda m, t, k, c: CellStatus.SKIPPED if t == "ts" else CellStatus.OK  # noqa: E731
    files = [synthetic.write_build(
        str(tmp_path / f"b{i}.json"), f"b{i}", seed=i, metadata_overrides=_md(i),
        factor=lambda m, t, k, c: 1.3 if t == "compiled" and i >= 3 else 1.0,
        status=never, **{**SMALL, "tools": ("pt", "compiled", "ts")}) for i in range(6)]
    api.history_add(files, str(tmp_path / "store"))
    front = Path(api.build_dashboard(str(tmp_path / "store"), str(tmp_path / "site")))
    text = _text(front)
    assert text.index("Open changes (1)") < text.index("Tools and tasks")
    assert "Not run: perf1: ts never ran (every config skipped or unsupported)." in text
    summary = text[text.index("Tools and tasks"):text.index("Environment changes")]
    assert " pt fwd " in summary and " compiled fwd " in summary
    assert " ts fwd " not in summary


def test_a_benchmark_page_shows_the_chained_lockstep_timeline(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    api.history_add([synthetic.write_build(str(tmp_path / "b0.json"), "b0", seed=0,
                                           metadata_overrides=_md(0), **SMALL)], store)
    per_process = [1.0, 1.4, 0.8]
    for n in (1, 2, 3):
        api.history_add([synthetic.write_ab_folder(
            str(tmp_path / f"ab{n}"), f"b{n - 1}", f"b{n}", seed=10 * n,
            base_metadata=_md(n), new_metadata=_md(n),
            new_factor=lambda m, t, k, c: 1.2 if t == "compiled" and n == 2 else 1.0,
            machine=lambda m, t, k, p: per_process[p], **SMALL)], store)
    api.build_dashboard(store, str(tmp_path / "site"))
    (page,) = (tmp_path / "site" / "benchmarks").glob("vrelu3_compiled_fwd_1024-*.html")
    text = _text(page)
    timeline = text[text.index("Lockstep timeline"):text.index("Builds, newest first")]
    rows = re.findall(r" (b\d) (\S+ \S+) (?:(\S+x \[\S+x, \S+x\]) )?(1 \(chain start\)|\S+x "
                      r"\[\S+x, \S+x\])", timeline)
    assert [r[0] for r in rows] == ["b3", "b2", "b1", "b0"], timeline
    assert rows[-1][3] == "1 (chain start)"
    link_b2 = float(rows[1][2].split("x")[0])
    assert 1.15 < link_b2 < 1.25
    chained_b3 = float(rows[0][3].split("x")[0])
    assert 1.15 < chained_b3 < 1.25  # b3 kept b2's level


def test_consecutive_machine_speed_events_read_as_one_entry(tmp_path: Path) -> None:
    # The machine ran 1.6x slow on nights 1 and 3 only: every pair of builds from b0 to b4
    # is a machine-speed event, and the run of them is one entry.
    files = [synthetic.write_build(
        str(tmp_path / f"b{i}.json"), f"b{i}", seed=i, metadata_overrides=_md(i),
        machine=lambda *k: 1.6 if i in (1, 3) else 1.0, **SMALL) for i in range(7)]
    api.history_add(files, str(tmp_path / "store"))
    text = _text(Path(api.build_dashboard(str(tmp_path / "store"), str(tmp_path / "site"))))
    environment = text[text.index("Environment changes"):text.index("Models (")]
    assert environment.startswith("Environment changes (1) "), environment
    assert re.search(r"b0 \(\S+\) b4 \(\S+\) machine speed \(4 pairs of builds in a row\)",
                     environment), environment


def test_a_two_build_report_opens_with_the_verdict_and_folds_equal_environment(
        tmp_path: Path) -> None:
    base = synthetic.write_build(str(tmp_path / "a.json"), "a", seed=1, **SMALL)
    new = synthetic.write_build(str(tmp_path / "b.json"), "b", seed=2,
                                factor=lambda m, t, k, c: 1.5 if t == "compiled" else 1.0,
                                **SMALL)
    out = api.write_report([base, new], str(tmp_path / "report.html"))
    page = Path(out).read_text()
    text = _text(Path(out))
    assert text.index("Comparison: a → b") < text.index("Regression: something")
    assert text.index("Regressions (1)") < text.index("keys differ between the builds")
    regressions = text[text.index("Regressions (1)"):text.index("Every benchmark")]
    assert "vrelu3/compiled/fwd/1024" in regressions
    assert "vrelu3/pt/fwd/1024" not in regressions
    # Only the build label differs: one row shown, the others folded under <details>.
    assert "1 of " in text and " keys differ between the builds:" in text
    shown, folded = page.split("<details><summary>the ", 1)
    shown = shown[shown.index('id="environment"'):]
    assert "<th>build</th>" in shown and "<th>torch_version</th>" not in shown
    assert "<th>torch_version</th>" in folded.split("</details>", 1)[0]
