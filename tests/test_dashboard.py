"""The dashboard (`run-benchmarks dashboard`) of a synthetic history store with a planted
slowdown, a status change, an environment change and a model named
<script>alert(1)</script>: what the front page says, that every name is escaped, that every
link resolves to a file of the site and none leaves it, and, in headless Chromium (skipped
when `chromium` is not on PATH), that the pages render with no console message and that the
search filter works."""

from __future__ import annotations

import html.parser
import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

import synthetic
from kscperf import api, history
from kscperf.errors import CellStatus
from kscperf.views import dashboard
from runner_testing import chromium, cli, console_messages, explain, needs_chromium, \
    single_error_line

pytestmark = pytest.mark.integration

EVIL = "<script>alert(1)</script>"
BUILDS = 9


def _factor(i: int) -> Any:
    return lambda m, t, k, c: 1.3 if (t == "compiled" and i >= 4) else 1.0


def _status(i: int) -> Any:
    return lambda m, t, k, c: (CellStatus.INCORRECT if i >= 7 and (t, k, c) == (
        "compiled", "bwd", "1024") else CellStatus.OK)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("dashboard")
    files = [synthetic.write_build(
        str(d / f"b{i}.json"), f"b{i}", seed=i, models=("vrelu3", EVIL),
        tools=("pt", "compiled"), tasks=("fwd", "bwd"), configs=("1024", "16384"),
        processes=5, factor=_factor(i), status=_status(i),
        metadata_overrides={"date": f"2024-05-{i + 1:02d}T12:00:00",
                            "git_commit": f"{i:04d}" + "c" * 36,
                            "torch_version": "2.14.0" if i >= 6 else "2.13.0"})
        for i in range(BUILDS)]
    store = d / "store"
    assert cli("history", "add", *files, "--store", store).returncode == 0
    out = d / "site"
    proc = cli("dashboard", "--store", store, "-o", out)
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.strip() == f"wrote {out / 'index.html'}"
    return store, out


def _pages(out: Path) -> list[Path]:
    return sorted(out.rglob("*.html"))


def test_front_page_shows_open_changes_regressions_first(site: tuple[Path, Path]) -> None:
    store, _ = site
    with history.open_store(str(store)) as s:
        view = dashboard.build_views(s).index
    assert [(r.tool, r.task) for r in view.summary] == [
        ("compiled", "bwd"), ("compiled", "fwd"), ("pt", "bwd"), ("pt", "fwd")]
    compiled_bwd = view.summary[0]
    assert compiled_bwd.pass_rate.latest == "50% (2/4)"  # 1024 incorrect, both models
    assert compiled_bwd.speedup.spark.startswith("<svg")
    kinds = [c.what for c in view.changes]
    regressions = [i for i, c in enumerate(view.changes) if c.tone == "bad"]
    assert regressions == list(range(len(regressions))) and regressions, kinds
    assert "status ok -> incorrect" in kinds and "slower" in kinds
    slower = next(c for c in view.changes if c.what == "slower")
    assert (slower.before[:2], slower.after[:2]) == ("b3", "b4")
    assert slower.ratio in ("1.29x", "1.30x", "1.31x")
    for path in slower.compare.split()[2:]:
        assert Path(path).is_file()
    assert slower.bisect.startswith(
        "run-benchmarks bisect --repo REPO --good 0003cccccccc --bad 0004cccccccc -k ")
    assert [(e.before[:2], e.after[:2], e.detail) for e in view.environment] == [
        ("b5", "b6", "torch_version 2.13.0 -> 2.14.0")]
    assert [m.model for m in view.models] == [EVIL, "vrelu3"]


def test_every_name_is_escaped(site: tuple[Path, Path]) -> None:
    _, out = site
    for page in _pages(out):
        text = page.read_text(encoding="utf-8")
        assert "alert(1)" not in text.replace("&lt;script&gt;alert(1)&lt;/script&gt;", ""), page
        assert len(re.findall(r"<script\b", text)) == 1, page  # the filter, nothing else


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.links.append(value)


def test_every_link_resolves_to_a_page_of_the_site(site: tuple[Path, Path]) -> None:
    _, out = site
    pages = _pages(out)
    assert len(pages) == 1 + 2 + 2 * 2 * 2 * 2  # front, models, benchmarks
    reached: set[Path] = set()
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in parser.links:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, (page, link)  # nothing leaves
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_file(), (page, link)
            reached.add(target)
    assert reached == {p.resolve() for p in pages}  # and every page is linked


def test_a_store_without_builds_is_refused(tmp_path: Path) -> None:
    proc = cli("dashboard", "--store", tmp_path / "none", "-o", tmp_path / "site")
    assert proc.returncode == 2 and "not a history store" in proc.stderr, explain(proc)
    assert not (tmp_path / "site").exists()


def _site_files(out: Path) -> dict[str, str]:
    """Every file of a site by its path in the site, with the time it was built left out."""
    return {str(p.relative_to(out)): re.sub(r"built \d{4}-\d\d-\d\dT[\d:]+\.", "built <time>.",
                                            p.read_text(encoding="utf-8"))
            for p in sorted(out.rglob("*")) if p.is_file()}


def test_the_api_writes_the_same_site(site: tuple[Path, Path], tmp_path: Path) -> None:
    store, by_cli = site
    front = api.build_dashboard(str(store), str(tmp_path / "again"))
    assert Path(front) == tmp_path / "again" / "index.html"
    again, expected = _site_files(tmp_path / "again"), _site_files(by_cli)
    assert sorted(again) == sorted(expected)
    for name, text in expected.items():
        assert again[name] == text, name
    assert "built <time>." in expected["index.html"]


def test_an_output_that_is_a_file_is_refused_with_one_line(site: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    store, _ = site
    plain = tmp_path / "site.html"
    plain.write_text("mine")
    line = single_error_line(cli("dashboard", "--store", store, "-o", plain))
    assert str(plain) in line
    assert plain.read_text() == "mine"


def test_a_rebuild_removes_pages_of_benchmarks_that_are_gone(tmp_path: Path) -> None:
    store = tmp_path / "store"
    one = synthetic.write_build(str(tmp_path / "b0.json"), "b0", seed=1, models=("vrelu3",),
                                tools=("pt",), tasks=("fwd",), configs=("1024", "16384"),
                                processes=3)
    api.history_add([one], str(store))
    out = tmp_path / "site"
    api.build_dashboard(str(store), str(out))
    first = {p.relative_to(out) for p in _pages(out)}
    mine = out / "notes.html"
    mine.write_text("mine")
    shutil.rmtree(store)
    two = synthetic.write_build(str(tmp_path / "b1.json"), "b1", seed=2, models=("vrelu3",),
                                tools=("pt",), tasks=("fwd",), configs=("1024",), processes=3)
    api.history_add([two], str(store))
    api.build_dashboard(str(store), str(out))
    second = {p.relative_to(out) for p in _pages(out)}
    assert second < first | {Path("notes.html")} and len(second) == len(first)
    assert not any("16384" in str(p) for p in second)
    assert mine.read_text() == "mine"  # not one of the dashboard's pages: left alone


def test_values_too_large_to_scale_leave_a_gap_not_nan(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    files = [synthetic.write_build(
        str(tmp_path / f"b{i}.json"), f"b{i}", seed=i, models=("vrelu3",), tools=("pt",),
        tasks=("fwd",), configs=("1024",), processes=3,
        metadata_overrides={"date": f"2024-05-{i + 1:02d}T12:00:00"}) for i in range(3)]
    # A broken clock in the middle build: every value near the largest float (an odd count,
    # so the medians stay finite).
    doc = json.loads(Path(files[1]).read_text())
    for bench in doc["benchmarks"]:
        if bench["metadata"]["name"] == "vrelu3/pt/fwd/1024":
            for run in bench["runs"]:
                if "values" in run:
                    run["values"] = [1.7e308] * 9
    Path(files[1]).write_text(json.dumps(doc))
    api.history_add(files, store)
    out = tmp_path / "site"
    api.build_dashboard(store, str(out))
    for page in _pages(out):
        assert not re.search(r'="[^"]*\bnan', page.read_text(encoding="utf-8"), re.I), page


# --------------------------------------------------------------------------------------
# In a browser
# --------------------------------------------------------------------------------------


# Appended to a copy of a page: types into the filter and reports what the browser shows.
_PROBE = """<script>
(function () {
  function visible() {
    return Array.prototype.filter.call(document.querySelectorAll("[data-filter]"),
      function (r) { return r.offsetParent !== null; }).length;
  }
  var form = document.getElementById("filter");
  var before = visible();
  form.elements.model.value = "vrelu3";
  form.elements.model.dispatchEvent(new Event("input", {bubbles: true}));
  var result = {rows: document.querySelectorAll("[data-filter]").length, before: before,
                after: visible(), formShown: !form.hidden,
                svgs: document.querySelectorAll("svg").length,
                unsized: Array.prototype.filter.call(document.querySelectorAll("svg"),
                  function (s) { var r = s.getBoundingClientRect();
                                 return !(r.width > 10 && r.height > 10); }).length};
  var pre = document.createElement("pre");
  pre.id = "kscperf-probe";
  pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
})();
</script>"""



@needs_chromium
def test_pages_render_with_no_console_message_and_names_as_text(
        site: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = site
    pages = [out / "index.html", next((out / "models").iterdir()),
             next((out / "benchmarks").iterdir())]
    for page in pages:
        done = chromium(tmp_path, page, "--dump-dom")
        assert done.returncode == 0, done.stderr[-2000:]
        assert console_messages(done.stderr) == [], page
        assert len(re.findall(r"<script\b", done.stdout)) == 1, page
    front = chromium(tmp_path, out / "index.html", "--dump-dom").stdout
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in front


@needs_chromium
def test_the_filter_hides_rows_that_do_not_match(site: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    _, out = site
    probe = out / "probe.html"
    probe.write_text((out / "index.html").read_text(encoding="utf-8").replace(
        "</body>", _PROBE + "</body>"), encoding="utf-8")
    try:
        done = chromium(tmp_path, probe, "--dump-dom")
    finally:
        probe.unlink()
    assert console_messages(done.stderr) == []
    found = re.search(r'<pre id="kscperf-probe">(.*?)</pre>', done.stdout, flags=re.S)
    assert found, done.stdout[-2000:]
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert result["formShown"] and result["svgs"] > 10 and result["unsized"] == 0
    assert result["before"] == result["rows"]
    # The summary rows have no model and stay; rows of the other model go.
    assert 4 < result["after"] < result["before"]


def test_without_javascript_every_row_shows(site: tuple[Path, Path]) -> None:
    _, out = site
    text = (out / "index.html").read_text(encoding="utf-8")
    assert '<form id="filter" hidden>' in text
    assert not re.search(r"<tr[^>]*\bhidden\b", text)
