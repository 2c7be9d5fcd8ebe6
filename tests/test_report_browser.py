"""The HTML report in a real browser: headless Chromium, offline, from disk.

Checks that the report renders its tables and figures with nothing missing (every SVG laid
out with a size, every internal reference resolving), logs nothing to the console, and shows
a model named <script>alert(1)</script> as text. Skipped when `chromium` is not on PATH.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import synthetic
from kscperf.errors import CellStatus
from kscperf.results.files import load_results
from kscperf.views.report import render_report, write_report
from runner_testing import chromium, console_messages, needs_chromium

pytestmark = [pytest.mark.integration, needs_chromium]

EVIL = "<script>alert(1)</script>"


# Appended to a copy of the report (the report itself has no script): measures what the
# browser laid out and writes it into the DOM for --dump-dom to return.
_PROBE = """<script>
(function () {
  function resolves(ref) { return ref === null || document.getElementById(ref) !== null; }
  var svgs = Array.prototype.slice.call(document.querySelectorAll("svg"));
  var refs = [];
  document.querySelectorAll("svg *").forEach(function (el) {
    ["clip-path", "href", "xlink:href", "style"].forEach(function (name) {
      var value = el.getAttribute(name) || "";
      var m = value.match(/url\\(#([^)]+)\\)/) || value.match(/^#(.+)$/);
      if (m) { refs.push(m[1]); }
    });
  });
  var result = {
    tables: document.querySelectorAll("table").length,
    emptyTables: Array.prototype.filter.call(document.querySelectorAll("table"),
      function (t) { return t.querySelectorAll("tbody tr").length === 0; }).length,
    svgs: svgs.length,
    unsizedSvgs: svgs.filter(function (s) {
      var r = s.getBoundingClientRect(); return !(r.width > 50 && r.height > 50); }).length,
    svgsWithoutText: svgs.filter(function (s) {
      return s.querySelectorAll("text").length === 0; }).length,
    references: refs.length,
    dangling: refs.filter(function (r) { return !resolves(r); }),
    scripts: document.querySelectorAll("script").length,
    headings: Array.prototype.map.call(document.querySelectorAll("h2"),
      function (h) { return h.textContent; }),
    svgTexts: Array.prototype.map.call(document.querySelectorAll("svg text"),
      function (t) { return t.textContent; })
  };
  var pre = document.createElement("pre");
  pre.id = "kscperf-probe";
  pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
})();
</script>"""



@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("browser")
    small: dict[str, Any] = dict(models=("vrelu3", EVIL), tools=("pt", "compiled"),
                                 tasks=("fwd", "bwd"))
    paths = [
        synthetic.write_build(str(d / "a.json"), "a", seed=1, **small),
        synthetic.write_build(str(d / "b.json"), "b", seed=2, **small),
        synthetic.write_build(
            str(d / "c.json"), "c", seed=3, **small,
            factor=lambda m, t, k, c: 1.25 if t == "compiled" else 1.0,
            status=lambda m, t, k, c: (CellStatus.INCORRECT if (t, c) == ("compiled", "1024")
                                       else CellStatus.OK)),
    ]
    page = d / "report.html"
    write_report(str(page), render_report([load_results(p) for p in paths]))
    return page


def test_console_messages_are_noticed(tmp_path: Path) -> None:
    # The check below is only worth something if it sees a console error when there is one.
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><p>x</p><script>console.error("boom"); nope();</script>')
    done = chromium(tmp_path, page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    messages = console_messages(done.stderr)
    assert any("boom" in m for m in messages) and any("Uncaught" in m for m in messages)


def test_report_renders_withoutconsole_messages(report: Path, tmp_path: Path) -> None:
    done = chromium(tmp_path, report, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    dom = done.stdout
    assert dom.count("<table") >= 4 and dom.count("<svg") == 10
    # Shown as text, never parsed as an element: the DOM has no script element at all.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert not re.search(r"<script\b", dom)


def test_tables_and_figures_are_laid_out_with_nothing_missing(report: Path,
                                                              tmp_path: Path) -> None:
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"),
                     encoding="utf-8")
    done = chromium(tmp_path, probe, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    found = re.search(r'<pre id="kscperf-probe">(.*?)</pre>', done.stdout, flags=re.S)
    assert found, done.stdout[-2000:]
    text = found.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    result = json.loads(text.replace("&amp;", "&"))
    assert result["tables"] >= 4 and result["emptyTables"] == 0
    assert result["svgs"] == 10
    assert result["unsizedSvgs"] == 0 and result["svgsWithoutText"] == 0
    assert result["references"] > 0 and result["dangling"] == []
    assert result["scripts"] == 1  # the probe itself
    assert EVIL in result["headings"]
    assert any(EVIL in t for t in result["svgTexts"])


def test_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    done = chromium(tmp_path, report, f"--screenshot={shot}", "--window-size=1280,2400")
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    from PIL import Image  # matplotlib depends on Pillow

    with Image.open(shot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
    assert colours is not None and len(colours) > 20
