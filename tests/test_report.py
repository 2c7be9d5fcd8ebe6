"""kscperf.views.report and kscperf.views.plots: the self-contained HTML report of synthetic builds,
its escaping (a model named <script>alert(1)</script>), its sections for one, two and
three builds, and the SVG figures' safety and reproducibility."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

import synthetic
from kscperf.compare.builds import compare_builds
from kscperf.errors import RECORDED_STATUSES, CellStatus, KscperfError
from kscperf.results.samples import summarize_build
from kscperf.views import formatting, plots
from kscperf.views.style import Tone
from kscperf.views.report import (
    ReportView,
    build_report_view,
    render_report,
    templates_dir,
    write_report,
)
from kscperf.results.files import LoadedResults, load_results

EVIL = "<script>alert(1)</script>"
MODELS = ("vrelu3", EVIL)
SMALL: dict[str, Any] = dict(models=MODELS, tools=("pt", "compiled"), tasks=("fwd", "bwd"))


def _broken_status(model: str, tool: str, task: str, config: str) -> CellStatus:
    if (model, tool, task, config) == ("vrelu3", "compiled", "fwd", "1024"):
        return CellStatus.INCORRECT
    return CellStatus.OK


def _crashed(model: str, tool: str, task: str) -> CellStatus | None:
    return CellStatus.CRASHED if (model, tool, task) == (EVIL, "compiled", "bwd") else None


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> list[LoadedResults]:
    d = tmp_path_factory.mktemp("report")
    paths = [
        synthetic.write_build(str(d / "b1.json"), "build-1", seed=1, **SMALL),
        synthetic.write_build(str(d / "b2.json"), "build-2", seed=2, **SMALL),
        synthetic.write_build(str(d / "b3.json"), "build-3", seed=3, **SMALL,
                              factor=lambda m, t, k, c: 1.25 if t == "compiled" else 1.0,
                              status=_broken_status, cell_status=_crashed),
    ]
    return [load_results(p) for p in paths]


@pytest.fixture(scope="module")
def html3(builds: list[LoadedResults]) -> str:
    return render_report(builds)


@pytest.fixture(scope="module")
def html1(builds: list[LoadedResults]) -> str:
    return render_report(builds[:1])


@pytest.fixture(scope="module")
def view3(builds: list[LoadedResults]) -> ReportView:
    return build_report_view(builds)


_EXTERNAL = re.compile(
    r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?!#)[^"'\s>]*:)"""
    r"""|url\(\s*["']?\s*(?!#)|@import|<link\b|<iframe\b|<object\b|<embed\b""", re.I)


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", html, flags=re.S)


def test_one_build(html1: str) -> None:
    assert html1.startswith("<!DOCTYPE html>")
    assert "<table" in html1 and "Environment" in html1
    assert "Comparison" not in html1 and 'id="history"' not in html1
    # Per model: time against size and speedup over pt.
    assert len(_svgs(html1)) == 4
    assert "speedup over pt" in html1 and "peak RSS" in html1


def test_one_build_opens_with_what_it_found_and_folds_the_environment(
        html1: str, builds: list[LoadedResults]) -> None:
    found, environment = html1.index('id="summary"'), html1.index('id="environment"')
    assert found < environment < html1.index("<table class=\"model\"")
    summary = html1[found:environment]
    assert "geometric mean of speedup over pt" in summary and "badge good" in summary
    counts = {}
    for c in builds[0].cells:
        counts[c.status.value] = counts.get(c.status.value, 0) + 1
    for status, n in counts.items():
        assert f"{status}: {n}</span>" in summary
    assert "<details><summary>the " in html1[environment:] and "keys of the environment" in html1


def test_three_builds_have_comparison_history_and_detectable_effects(html3: str) -> None:
    assert 'id="comparison"' in html3 and 'id="history"' in html3
    assert "build-2 → build-3" in html3
    assert "detectable" in html3
    assert "Regression: something is significantly slower" in html3
    assert "failing-now" in html3 and "incorrect-now" in html3
    # Per model 2 figures, per model one ratio figure, per model and task one history.
    assert len(_svgs(html3)) == 2 * 2 + 2 + 2 * 2
    # The last build's regressions are picked out in the history lines.
    assert "compiled/262144 (regression)" in html3


def test_the_page_is_self_contained_and_has_no_script(html3: str, html1: str) -> None:
    for html in (html3, html1):
        assert not _EXTERNAL.search(html), _EXTERNAL.search(html)
        assert "<script" not in html.lower()
        # The only http(s) strings are XML namespace names inside the SVG elements.
        assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {
            "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


def test_names_are_escaped_in_html_and_inside_svg(html3: str) -> None:
    assert EVIL not in html3
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html3
    svg_text = " ".join(_svgs(html3))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg_text


def test_incorrect_and_failed_cells_never_show_as_fast(view3: ReportView) -> None:
    view = view3
    vrelu3 = next(m for m in view.models if m.name == "vrelu3")
    incorrect = next(r for r in vrelu3.rows if (r.tool, r.task, r.config) == (
        "compiled", "fwd", "1024"))
    assert incorrect.badge == "INCORRECT" and incorrect.badge_class == "bad"
    assert incorrect.speedup == "—"
    assert "max abs err" in incorrect.badge_note
    evil = next(m for m in view.models if m.name == EVIL)
    crashed = [r for r in evil.rows if r.tool == "compiled" and r.task == "bwd"]
    assert crashed and all(r.badge == "CRASHED" and r.time == "—" for r in crashed)
    ok = next(r for r in vrelu3.rows if (r.tool, r.task, r.config) == (
        "compiled", "fwd", "16384"))
    assert ok.badge == "pass" and ok.speedup.endswith("x") and ok.time != "—"


def test_every_status_has_its_badge_and_mark(tmp_path: Path) -> None:
    every = tuple(s.value for s in CellStatus if s in RECORDED_STATUSES)
    loaded = load_results(synthetic.write_build(
        str(tmp_path / "every.json"), "every", seed=1, models=("m",), tools=("pt", "compiled"),
        tasks=("fwd",), configs=every, numel=False,
        status=lambda m, t, k, c: CellStatus(c) if t == "compiled" else CellStatus.OK))
    rows = {r.config: r for r in build_report_view([loaded]).models[0].rows
            if r.tool == "compiled"}
    assert {c: (r.badge, r.badge_class) for c, r in rows.items()} == {
        "ok": ("pass", "good"), "incorrect": ("INCORRECT", "bad"),
        "skipped": ("skipped", "muted"), "unsupported": ("unsupported", "muted"),
        "failed": ("FAILED", "bad"), "timeout": ("TIMEOUT", "bad"),
        "crashed": ("CRASHED", "bad"), "oom": ("OOM", "bad")}
    # Timed (ok, incorrect): a time, and the check in the badge's title; else the reason.
    assert {c for c, r in rows.items() if r.time != "—"} == {"ok", "incorrect"}
    assert rows["ok"].badge_detail.startswith("output: max abs err 1e-09")
    assert rows["ok"].badge_note == "" and rows["oom"].badge_note == "oom on purpose"
    table = formatting.format_run_table(*summarize_build(loaded)).splitlines()
    # The terminal table: one line per config, the compiled column last.
    compiled = {line.split()[1]: line.split("  ")[-1].strip() for line in table[2:]}
    assert compiled["ok"].endswith("x)")
    incorrect = compiled["incorrect"]  # timed, with no speedup
    assert "±" in incorrect and incorrect.endswith(" INCORRECT") and "x)" not in incorrect
    assert {c: compiled[c] for c in every if c not in ("ok", "incorrect")} == {
        "skipped": "skipped", "unsupported": "unsupported", "failed": "FAILED",
        "timeout": "TIMEOUT", "crashed": "CRASHED", "oom": "OOM"}
    check_table = formatting.format_check_table(loaded.cells)
    assert all(f" {s.value} " in check_table for s in RECORDED_STATUSES)


def test_environment_of_each_build(view3: ReportView) -> None:
    view = view3
    rows = {r.key: r for r in view.environment}
    assert rows["build"].values == ["build-1", "build-2", "build-3"]
    assert rows["build"].differs and not rows["hostname"].differs
    assert [r.key for r in view.environment][:3] == ["build", "date", "git_commit"]


def test_rendering_is_deterministic(builds: list[LoadedResults], html1: str) -> None:
    assert render_report(builds[:1]) == html1


def test_refuses_builds_from_different_machines_unless_forced(
        tmp_path: Path, builds: list[LoadedResults]) -> None:
    other = load_results(synthetic.write_build(
        str(tmp_path / "other.json"), "other", seed=9, models=("vrelu3",), tools=("pt",),
        tasks=("fwd",), metadata_overrides={"hostname": "elsewhere"}))
    with pytest.raises(KscperfError, match="different machines"):
        render_report([builds[0], other])
    html = render_report([builds[0], other], force=True)
    assert "compared despite different machines" in html
    # A comparison made with --force vouches for its own pair.
    forced = compare_builds(builds[0], other, force=True)
    assert "compared despite" in render_report([builds[0], other], forced)
    with pytest.raises(KscperfError, match="different machines"):
        render_report([builds[1], builds[0], other], forced)


def test_no_numel_falls_back_to_config_order(tmp_path: Path) -> None:
    results = load_results(synthetic.write_build(
        str(tmp_path / "a.json"), "a", seed=1, models=("m",), tools=("pt",), tasks=("fwd",),
        configs=("small", "large"), numel=False, base_s=lambda *k: 1e-3))
    html = render_report([results])
    svg = _svgs(html)[0]
    assert ">small<" in svg and ">large<" in svg
    assert ">elements<" not in svg


def test_plain_pyperf_files(tmp_path: Path) -> None:
    import pyperf

    runs = [pyperf.Run([1e-3, 1.1e-3, 0.9e-3], metadata={"name": "startup", "loops": 4},
                       collect_metadata=False) for _ in range(3)]
    pyperf.BenchmarkSuite([pyperf.Benchmark(runs)]).dump(str(tmp_path / "p.json"))
    results = load_results(str(tmp_path / "p.json"))
    html = render_report([results, results, results])
    assert 'id="benchmarks"' in html and "startup" in html
    assert "plain pyperf file" in html
    assert 'id="history"' in html


def test_no_results_is_an_error() -> None:
    with pytest.raises(KscperfError):
        render_report([])


def test_write_report_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.html"
    write_report(str(target), "<!DOCTYPE html><p>one</p>")
    write_report(str(target), "<!DOCTYPE html><p>two</p>")
    assert target.read_text() == "<!DOCTYPE html><p>two</p>"
    assert os.listdir(target.parent) == ["report.html"]
    with pytest.raises(KscperfError, match="directory"):
        write_report(str(tmp_path), "x")


def test_templates_live_in_the_repository() -> None:
    assert templates_dir() == Path(__file__).resolve().parent.parent / "templates"
    text = (templates_dir() / "report.html.j2").read_text()
    # Logic-free: no arithmetic or comparisons in the template.
    expressions = re.findall(r"{[{%](.*?)[}%]}", text, flags=re.S)
    for expression in expressions:
        assert not re.search(r"[-+*/<>]|==|!=|\b(?:round|sum|max|min)\b", expression), expression


# ------------------------------------------------------------------------------ plots

def test_svg_is_deterministic_escaped_and_checked() -> None:
    series = [plots.Series(EVIL, [1e3, 1e4], [1e-4, 1e-3], [9e-5, 9e-4], [1.1e-4, 1.1e-3]),
              plots.Series("_private $x$", [1e3, 1e4], [2e-4, float("nan")], colour_index=1)]
    first = plots.plot_time_vs_size(f"title {EVIL}", [plots.Panel("fwd", series)], key="t1")
    again = plots.plot_time_vs_size(f"title {EVIL}", [plots.Panel("fwd", series)], key="t1")
    assert first == again
    assert first.startswith("<svg") and first.rstrip().endswith("</svg>")
    assert EVIL not in first and "&lt;script&gt;alert(1)&lt;/script&gt;" in first
    # Legend labels starting with "_" are kept, "$" is not mathtext.
    assert ">_private $x$<" in first
    assert "<dc:date>" not in first and "Matplotlib v" not in first
    ids = re.findall(r'\bid="([^"]+)"', first)
    assert ids and all(i.startswith("t1-") for i in ids)
    assert plots.check_svg(first) == first


def test_text_that_looks_like_markup_is_just_text() -> None:
    name = 'javascript: x onload=y id="z" url(#p) href="#q" <!-- -->'
    svg = plots.plot_ratios(name, [plots.RatioPoint(name, 1.0, 0.9, 1.1)], min_effect=0.05,
                            key="r2")
    assert 'onload=y id="z" url(#p) href="#q" &lt;!-- --&gt;' in svg


@pytest.mark.parametrize("bad", [
    "<svg><script>alert(1)</script></svg>",
    '<svg onload="alert(1)"></svg>',
    '<svg><use href="https://example.com/x.svg#a"/></svg>',
    '<svg><rect style="fill: url(https://example.com/p)"/></svg>',
    "<svg><foreignObject><p>x</p></foreignObject></svg>",
    "<svg><!-- a comment --></svg>",
    '<svg><style>@import "https://example.com/a.css";</style></svg>',
    '<svg><set attributeName="href" to="javascript:alert(1)"/></svg>',
    "<div></div>",
    "<svg></svg><svg></svg>",
])
def test_check_svg_refuses_anything_else(bad: str) -> None:
    with pytest.raises(ValueError):
        plots.check_svg(bad)


def test_other_figures_render() -> None:
    nan = float("nan")
    bars = plots.plot_speedups("speed", [plots.Bar("fwd", "compiled", 2.0),
                                         plots.Bar("bwd", "compiled", nan)], key="s1")
    assert "n/a" in bars and ">2x<" in bars
    ratios = plots.plot_ratios("ratios", [plots.RatioPoint("a", 1.2, 1.1, 1.3, Tone.BAD),
                                          plots.RatioPoint("b", nan, nan, nan)],
                               min_effect=0.05, key="r1")
    assert "#c62828" in ratios and "n/a" in ratios
    history = plots.plot_history("h", ["b1", "b2", "b3"], [
        plots.Series("pt", [0, 1, 2], [1.0, 1.01, 0.99]),
        plots.Series("pt/1024", [0, 1, 2], [1.0, 1.0, 1.3], highlight=True)], key="h1")
    assert "pt/1024 (regression)" in history
    with pytest.raises(ValueError):
        plots.plot_history("h", ["b"], [], key="1 bad key")
