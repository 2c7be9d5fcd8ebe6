"""The documentation: README.md stays short and keeps its two commands, and every relative
link in README.md, CONTRIBUTING.md and docs/*.md leads somewhere.

A relative link (`[text](target)` or an image `![alt](target)`) must name a file or folder
inside the repository; a `#fragment` into a Markdown file (or into the same file) must name
one of its headings, slugged as GitHub does. http(s) and mailto links are not checked (no
network). Links inside fenced code blocks and inline code are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The two commands a newcomer copies, exactly as the README gives them.
RUN_SUITE = ("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
             "pip install -e . && run-benchmarks --fast --report report.html")
RUN_TESTS = ("python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
             "pip install -e '.[test,onnx]' && python -m pytest -q")
README_MAX_LINES = 200

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) or ![alt](target), the text holding at most one level of brackets, the
# target optionally in <...> and followed by a "title".
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXTERNAL = ("http://", "https://", "mailto:")


def doc_files() -> list[Path]:
    """The Markdown files whose links are checked."""
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [f for f in files if f.is_file()]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code removed."""
    out = []
    fence = ""
    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            if not fence:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = ""
            continue
        if not fence:
            out.append((number, _INLINE_CODE.sub("", line)))
    return out


def extract_links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image outside code."""
    links = []
    for number, line in prose_lines(text):
        for m in _LINK.finditer(line):
            links.append((number, m.group(1).strip("<>")))
    return links


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: the link text of inline links kept, lowercase,
    punctuation dropped except '-' and '_', spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in "-_ ")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text, with GitHub's -1, -2 for repeated ones."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _heading_lines(text):
        slug = github_slug(line)
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def _heading_lines(text: str) -> list[tuple[int, str]]:
    # Headings are read with their inline code kept: `ab` in a heading is part of its slug.
    fenced = {n for n, _ in prose_lines(text)}
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        m = _HEADING.match(line)
        if m and number in fenced:
            out.append((number, m.group(2)))
    return out


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """One message per link of the Markdown file `path` that does not resolve."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for number, target in extract_links(text):
        if target.startswith(_EXTERNAL):
            continue
        where = f"{path.relative_to(root)}:{number}: {target}"
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not dest.is_relative_to(root.resolve()):
            problems.append(f"{where}: outside the repository")
            continue
        if not dest.exists():
            problems.append(f"{where}: no such file")
            continue
        if fragment and dest.suffix == ".md":
            if fragment not in anchors(dest.read_text(encoding="utf-8")):
                problems.append(f"{where}: no heading with the anchor #{fragment} in "
                                f"{dest.relative_to(root.resolve())}")
    return problems


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it under {README_MAX_LINES} and move detail "
        "to docs/")


@pytest.mark.parametrize("command", [RUN_SUITE, RUN_TESTS], ids=["run-suite", "run-tests"])
def test_readme_gives_the_command(command: str) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```sh\n{command}\n```" in text


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(path: Path) -> None:
    problems = broken_links(path)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_docs_pages_exist() -> None:
    assert (ROOT / "docs").is_dir() and len(doc_files()) > 2


def test_github_slug() -> None:
    assert github_slug("Two builds in lockstep (`ab`)") == "two-builds-in-lockstep-ab"
    assert github_slug("The `kscperf` key") == "the-kscperf-key"
    assert github_slug("Third-party compilers (plug-ins)") == "third-party-compilers-plug-ins"
    assert github_slug("What this buys, at the default profile") == (
        "what-this-buys-at-the-default-profile")
    assert github_slug("merge and shards") == "merge-and-shards"


def test_extract_links_skips_code() -> None:
    text = ("See [a](a.md) and ![pic](img/p.png \"title\") and [b](<b c.md>).\n"
            "Not `[x](inline.md)`.\n"
            "```\n[y](fenced.md)\n```\n"
            "[web](https://example.com/x) [sec](#top)\n")
    assert extract_links(text) == [(1, "a.md"), (1, "img/p.png"), (1, "b c.md"),
                                    (6, "https://example.com/x"), (6, "#top")]


def test_broken_links_are_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Some section\n")
    (tmp_path / "docs" / "pic.png").write_bytes(b"")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n## Repeated\n\n## Repeated\n\n"
        "[ok](other.md) [ok](other.md#some-section) ![ok](pic.png) [ok](#repeated-1)\n"
        "[gone](missing.md)\n"
        "[bad anchor](other.md#no-such-section)\n"
        "[self](#nowhere)\n"
        "![broken image](img/nothing.png)\n"
        "[outside](../../elsewhere.md)\n"
        "[web](https://example.com/not-checked)\n")
    problems = broken_links(page, root=tmp_path)
    assert [p.split(": ", 1)[0] for p in problems] == [
        "docs/page.md:8", "docs/page.md:9", "docs/page.md:10", "docs/page.md:11",
        "docs/page.md:12"]
    assert "no such file" in problems[0]
    assert "#no-such-section" in problems[1]
    assert "#nowhere" in problems[2]
    assert "no such file" in problems[3]
    assert "outside the repository" in problems[4]


_CONFLICT_MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.MULTILINE)


def conflict_markers(text: str) -> list[str]:
    """The lines of `text` that are left-over merge conflict markers."""
    return [m.group(0) for m in _CONFLICT_MARKER.finditer(text)]


def _project_files() -> list[Path]:
    """The files of the project: those git tracks or would track (not what .gitignore
    leaves out, such as virtual environments that benchmark scripts create), or every
    file under the root outside a git checkout."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        return [p for p in ROOT.rglob("*") if ".venv" not in p.relative_to(ROOT).parts]
    return [ROOT / line for line in listed.stdout.splitlines() if line]


def test_no_file_holds_merge_conflict_markers() -> None:
    # A merge committed with its markers still builds; only a reader notices.
    suffixes = {".py", ".md", ".j2", ".sh", ".toml", ".yml", ".yaml", ".cfg", ""}
    skip = {".git", "__pycache__", "vendor", "data", "fixtures"}
    found = []
    for path in _project_files():
        if path.is_file() and path.suffix in suffixes and not skip & set(
                path.relative_to(ROOT).parts):
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            if conflict_markers(text):
                found.append(str(path.relative_to(ROOT)))
    assert not found


def test_the_marker_check_would_catch_one() -> None:
    text = "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> branch\n"
    assert len(conflict_markers(text)) == 3
    assert conflict_markers("a ======= b\n==== \n") == []


def test_the_ownership_table_matches_the_tree() -> None:
    # CONTRIBUTING.md's table says which module owns what; a module it does not name, or a
    # name it keeps after the module went, makes the layout lie.
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `(kscperf/[\w/]+\.py)` \|", text, re.MULTILINE))
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kscperf").rglob("*.py")}
    assert sorted(modules - named) == [] and sorted(named - modules) == []
