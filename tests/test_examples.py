"""The examples under examples/ stay runnable as written: every `run-benchmarks` command in
them (shell scripts, the workflow's `run:` blocks, the README's shell blocks) is accepted by
today's parser and names a real command; each example merges and compares with
--fail-on-regression; the scripts are valid bash; the workflow and the Slurm scripts have
the shape examples/README.md describes; and nightly.sh really runs, twice, on a tiny suite.

Shell expansions cannot be known statically, so each is replaced by a placeholder that every
option of the parser accepts as a value (see `substitute_expansions`)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from kscperf import cli, history
from runner_testing import DEFS, ROOT, explain, load_doc, run_benchmarks_command
from test_docs import broken_links

pytestmark = pytest.mark.integration

EXAMPLES = ROOT / "examples"
WORKFLOW = EXAMPLES / "github-actions" / "nightly.yml"
SLURM = EXAMPLES / "slurm"
NIGHTLY = EXAMPLES / "nightly.sh"
NIGHTLY_AB = EXAMPLES / "nightly-ab.sh"

COMMAND = "run-benchmarks"
# What an expansion becomes: a path, a label, a positive number, and `--shard "$i/$n"`
# becomes `--shard 1/1`, all of which the parser accepts.
PLACEHOLDER = "1"
SHELL_SUFFIXES = (".sh", ".sbatch")
# The examples every change must keep: each merges and compares.
PIPELINES = ("nightly.sh", "github-actions", "slurm")


# --- finding the commands -------------------------------------------------------------------

def substitute_expansions(line: str) -> tuple[str, list[str]]:
    """`line` with every shell expansion ($NAME, ${...}, $(...), $((...)), `...`) and every
    GitHub Actions expression (${{ ... }}) replaced by PLACEHOLDER, and the scripts inside
    its command substitutions $(...), which hold commands of their own. Single-quoted text
    is left alone, as the shell leaves it."""
    out: list[str] = []
    inner: list[str] = []
    i, n, in_double = 0, len(line), False
    while i < n:
        c = line[i]
        if c == "\\" and i + 1 < n:
            out.append(line[i:i + 2])
            i += 2
        elif c == "'" and not in_double:
            end = line.find("'", i + 1)
            end = n if end < 0 else end + 1
            out.append(line[i:end])
            i = end
        elif c == '"':
            in_double = not in_double
            out.append(c)
            i += 1
        elif c == "`":
            end = line.find("`", i + 1)
            end = n if end < 0 else end + 1
            inner.append(line[i + 1:end - 1])
            out.append(PLACEHOLDER)
            i = end
        elif c == "$" and (end := _expansion_end(line, i)) > i + 1:
            if line.startswith("$(", i) and not line.startswith("$((", i):
                inner.append(line[i + 2:end - 1])
            out.append(PLACEHOLDER)
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out), inner


def _expansion_end(line: str, i: int) -> int:
    """Where the expansion starting with the `$` at `i` ends (i + 1: no expansion)."""
    rest = line[i + 1:]
    if rest.startswith("{{"):
        end = line.find("}}", i + 3)
        return len(line) if end < 0 else end + 2
    if rest[:1] in ("(", "{"):
        opening, closing = rest[0], ")" if rest[0] == "(" else "}"
        depth = 0
        for j in range(i + 1, len(line)):
            if line[j] == opening:
                depth += 1
            elif line[j] == closing:
                depth -= 1
                if depth == 0:
                    return j + 1
        return len(line)
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]", rest)
    return i + 1 + (m.end() if m else 0)


def logical_lines(script: str) -> Iterator[tuple[int, str]]:
    """(number of its first line, text) of each command line of `script`, with the lines
    that a backslash continues joined. A comment is never continued."""
    start, parts = 0, []
    for number, line in enumerate(script.splitlines(), 1):
        if not parts:
            start = number
        if line.endswith("\\") and not line.lstrip().startswith("#"):
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield start, "".join(parts)
        parts = []
    if parts:
        yield start, "".join(parts)


def shell_words(text: str) -> list[str]:
    """The words of a shell line, control operators and redirections as words of their own,
    comments dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def invocations(words: list[str]) -> Iterator[list[str]]:
    """The arguments of each `run-benchmarks` in `words`, up to the end of its command
    (`;`, `&&`, `||`, `|`, `&`, `)`), redirections left out."""
    for k, word in enumerate(words):
        if word != COMMAND and not word.endswith("/" + COMMAND):
            continue
        argv: list[str] = []
        rest = iter(words[k + 1:])
        for w in rest:
            if w[0] in "<>" or w in ("&>", "&>>"):
                if argv and argv[-1].isdigit():   # the 2 of 2>&1
                    argv.pop()
                next(rest, None)                  # the target
                continue
            if set(w) <= set(";&|()"):
                break
            argv.append(w)
        yield argv


@dataclass(frozen=True)
class Command:
    where: str        # file and line
    line: str         # the line as written
    argv: list[str]   # what follows run-benchmarks, expansions replaced


@dataclass(frozen=True)
class Script:
    path: str         # the file, relative to the repository
    offset: int       # its line number = this + the line's number in `text`
    text: str


def commands_in_shell(script: Script) -> list[Command]:
    """Every `run-benchmarks` command of a shell script, those inside $(...) included."""
    found = []
    for number, line in logical_lines(script.text):
        if COMMAND not in line:
            continue
        where = f"{script.path}:{script.offset + number}"
        text, inner = substitute_expansions(line)
        for argv in invocations(shell_words(text)):
            found.append(Command(where, line.strip(), argv))
        for sub in inner:
            found += commands_in_shell(Script(script.path, script.offset + number - 1, sub))
    return found


def workflow_runs(text: str) -> Iterator[tuple[int, str]]:
    """(line before its first, script) of every `run:` of the jobs' steps of a workflow."""
    def items(node: yaml.Node) -> dict[Any, yaml.Node]:
        return {k.value: v for k, v in node.value} if isinstance(node, yaml.MappingNode) else {}

    root = yaml.compose(text)
    for job in items(items(root).get("jobs", root)).values():
        steps = items(job).get("steps")
        for step in steps.value if isinstance(steps, yaml.SequenceNode) else []:
            run = items(step).get("run")
            if isinstance(run, yaml.ScalarNode):
                # A block scalar (run: |) starts on the line after its indicator.
                yield run.start_mark.line + (1 if run.style in ("|", ">") else 0), run.value


def markdown_shell_blocks(text: str) -> Iterator[tuple[int, str]]:
    """(line of the fence, body) of each ```sh, ```bash, ```shell or ```console block."""
    for m in re.finditer(r"^```(?:sh|bash|shell|console)\n(.*?)^```", text, re.M | re.S):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


def shell_scripts(path: Path) -> list[Script]:
    """The shell scripts an example file holds."""
    rel = str(path.relative_to(ROOT))
    text = path.read_text(encoding="utf-8")
    if path.suffix in SHELL_SUFFIXES:
        return [Script(rel, 0, text)]
    if path.suffix in (".yml", ".yaml"):
        return [Script(rel, line, script) for line, script in workflow_runs(text)]
    if path.suffix == ".md":
        return [Script(rel, line, body) for line, body in markdown_shell_blocks(text)]
    raise AssertionError(f"{rel}: no check knows this kind of file; teach tests/test_examples.py")


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*") if p.is_file())


def example_of(path: Path) -> str:
    """The example a file belongs to: its folder under examples/, or the file itself."""
    return path.relative_to(EXAMPLES).parts[0]


def all_commands() -> list[tuple[str, Command]]:
    """(example, command) of every `run-benchmarks` command under examples/."""
    return [(example_of(path), cmd) for path in example_files()
            for script in shell_scripts(path) for cmd in commands_in_shell(script)]


def parse_error(argv: list[str]) -> str | None:
    """Why `run-benchmarks ARGV` would stop before running (None: it parses), the way
    `kscperf.cli.main` parses it, except that the command must be named: the examples
    spell it out."""
    if not argv:
        return "no command after run-benchmarks"
    if argv[0] not in cli.SUBCOMMANDS:
        return f"{argv[0]!r} is not a command (the commands: {', '.join(cli.SUBCOMMANDS)})"
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            args = cli.build_parser().parse_args(argv)
    except SystemExit as exc:
        lines = stderr.getvalue().strip().splitlines()
        return lines[-1] if lines else f"the parser exited with {exc.code}"
    if args.command != argv[0]:
        return f"parsed as {args.command!r}, not {argv[0]!r}"
    return None


COMMANDS = all_commands()


# --- the commands ---------------------------------------------------------------------------

@pytest.mark.parametrize("example,command", COMMANDS, ids=[c.where for _, c in COMMANDS])
def test_every_command_parses(example: str, command: Command) -> None:
    problem = parse_error(command.argv)
    assert problem is None, (f"{command.where}: {problem}\n  {command.line}\n"
                             f"  parsed as: run-benchmarks {shlex.join(command.argv)}")


def test_the_examples_exist_and_each_merges_and_compares() -> None:
    by_example: dict[str, list[list[str]]] = {}
    for example, command in COMMANDS:
        by_example.setdefault(example, []).append(command.argv)
    for example in PIPELINES:
        argvs = by_example.get(example, [])
        assert any(a[:1] == ["run"] and "--shard" in a for a in argvs), \
            f"examples/{example}: no `run-benchmarks run ... --shard I/N`"
        assert any(a[:1] == ["merge"] for a in argvs), f"examples/{example}: no merge"
        assert any(a[:1] == ["compare"] and "--fail-on-regression" in a for a in argvs), \
            f"examples/{example}: no `compare ... --fail-on-regression`"
        assert any(a[:1] == ["report"] for a in argvs), f"examples/{example}: no report"


def test_each_pipeline_adds_the_build_to_the_store_and_rebuilds_the_dashboard() -> None:
    for example in PIPELINES:
        paths = [EXAMPLES / example] if (EXAMPLES / example).is_file() else \
            sorted((EXAMPLES / example).rglob("*"))
        text = "\n".join(p.read_text(encoding="utf-8") for p in paths if p.is_file())
        assert re.search(r"^\s*run-benchmarks history add .*--store", text, re.M), example
        assert re.search(r"^\s*run-benchmarks dashboard --store .* -o ", text, re.M), example


def test_the_checker_catches_what_would_break() -> None:
    """The extractor and the parser check together, on made-up lines."""
    def argvs(script: str) -> list[list[str]]:
        return [c.argv for c in commands_in_shell(Script("made-up", 0, script))]

    good = ('if x; then run-benchmarks run "${suite[@]}" --processes "$P" \\\n'
            '    --values "$((V * 2))" --shard "$i/$N" --balance "$(cat last)" -o x.json 2>&1 \\\n'
            '    || status=$?  # note\n'
            "fi\n")
    assert argvs(good) == [["run", "1", "--processes", "1", "--values", "1", "--shard", "1/1",
                            "--balance", "1", "-o", "x.json"]]
    assert parse_error(argvs(good)[0]) is None

    bad_flag = 'run-benchmarks run "$SUITE" --shard "$i/$N" --no-such-flag -o "$out"\n'
    assert "--no-such-flag" in (parse_error(argvs(bad_flag)[0]) or "")
    typo = "run-benchmarks compare a.json b.json --fail-on-regresion | tee out\n"
    assert "--fail-on-regresion" in (parse_error(argvs(typo)[0]) or "")
    missing_value = "run-benchmarks merge a.json b.json -o\n"
    assert parse_error(argvs(missing_value)[0]) is not None
    assert "not a command" in (parse_error(argvs('run-benchmarks frobnicate "$x"\n')[0]) or "")
    inside = 'out=$(run-benchmarks merge a.json -o b.json --bogus)\n'
    assert argvs(inside) == [["merge", "a.json", "-o", "b.json", "--bogus"]]
    assert parse_error(argvs(inside)[0]) is not None

    # Comments, quoted mentions and other programs are not commands.
    assert argvs("# run-benchmarks history add x.json\n  # run-benchmarks dashboard\n") == []
    assert argvs("echo 'run-benchmarks $x' \"run-benchmarks merge\"\n") == []
    # A workflow expression is a placeholder too.
    assert argvs('run-benchmarks run --shard "${{ matrix.shard }}/${{ strategy.job-total }}"\n') \
        == [["run", "--shard", "1/1"]]


def test_no_example_file_goes_unchecked() -> None:
    files = example_files()
    assert files, "examples/ is empty"
    for path in files:
        shell_scripts(path)   # raises for a kind of file no check knows


# --- the shell ------------------------------------------------------------------------------

def bash_syntax_error(script: Script, tmp_path: Path) -> str | None:
    """What `bash -n` says of the script (workflow expressions replaced), None if nothing."""
    path = tmp_path / "script.sh"
    path.write_text(re.sub(r"\$\{\{.*?\}\}", PLACEHOLDER, script.text), encoding="utf-8")
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    return None if proc.returncode == 0 else \
        f"{script.path} (script from line {script.offset + 1}): {proc.stderr.strip()}"


def test_shell_is_valid_bash(tmp_path: Path) -> None:
    scripts = [s for p in example_files() for s in shell_scripts(p)]
    assert len(scripts) >= 5
    problems = [e for s in scripts if (e := bash_syntax_error(s, tmp_path))]
    assert not problems, "\n".join(problems)


def test_scripts_are_executable_bash() -> None:
    for path in [NIGHTLY, NIGHTLY_AB, SLURM / "submit.sh", SLURM / "shard.sbatch",
                 SLURM / "merge.sbatch"]:
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first in ("#!/usr/bin/env bash", "#!/bin/bash"), f"{path}: {first}"
        assert "set -euo pipefail" in path.read_text(encoding="utf-8"), path
    for path in [NIGHTLY, NIGHTLY_AB, SLURM / "submit.sh"]:
        assert os.access(path, os.X_OK), f"{path} is not executable"


# --- the workflow and the Slurm scripts -----------------------------------------------------

def _steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).startswith(action + "@")]


def test_workflow_has_the_matrix_and_the_merge_job() -> None:
    doc = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # YAML 1.1, which PyYAML reads, takes the key `on` for true.
    on = doc.get("on", doc.get(True))
    assert on and "schedule" in on and "workflow_dispatch" in on
    shard, merge = doc["jobs"]["shard"], doc["jobs"]["merge"]

    strategy = shard["strategy"]
    assert strategy["fail-fast"] is False
    shards = strategy["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)) and len(shards) >= 2
    assert "self-hosted" in shard["runs-on"] and merge["runs-on"] == shard["runs-on"]
    needs = merge["needs"]
    assert "shard" in ([needs] if isinstance(needs, str) else needs)
    assert "cancelled()" in merge["if"] or "always()" in merge["if"]

    # One job installs the build's environment under PERF_HOME, torch first, the code not
    # editable (a snapshot of the build), and picks the base build once for every shard.
    setup = doc["jobs"]["setup"]
    assert "setup" in ([shard["needs"]] if isinstance(shard["needs"], str) else shard["needs"])
    assert "setup" in needs and setup["runs-on"] == shard["runs-on"]
    install = next(s["run"] for s in setup["steps"] if "torch==" in s.get("run", ""))
    assert install.index('pip" install "torch==') < install.index('pip" install .'), install
    assert "install -e" not in install and '"$PERF_HOME/envs/$BUILD"' in install
    assert set(setup["outputs"]) == {"base-build", "base-python"}
    for job in (shard, merge):
        assert "pip" not in "\n".join(s.get("run", "") for s in job["steps"])
        assert job["env"]["BASE_BUILD"] == "${{ needs.setup.outputs.base-build }}"
    runs = "\n".join(s.get("run", "") for s in shard["steps"])
    assert runs.count('--shard "${{ matrix.shard }}/${{ strategy.job-total }}"') == 2
    assert "--balance" in runs and "run-benchmarks ab " in runs and "--until-resolved" in runs

    uploads = _steps_using(shard, "actions/upload-artifact")
    assert len(uploads) == 1 and "always()" in uploads[0]["if"]
    assert "${{ matrix.shard }}" in uploads[0]["with"]["name"]
    [download] = _steps_using(merge, "actions/download-artifact")
    assert download["uses"].endswith("@v4")
    assert download["with"]["pattern"] and download["with"]["merge-multiple"] is True
    published = _steps_using(merge, "actions/upload-artifact")
    assert all(s["uses"].endswith("@v4") for s in uploads + published)

    by_name = {s.get("name", ""): s for s in merge["steps"]}
    report = next(s for n, s in by_name.items() if n.startswith("Write the report"))
    assert "always()" in report["if"]
    assert len(published) == 1
    assert "always()" in published[0]["if"] and ".html" in published[0]["with"]["path"]


def test_slurm_scripts_have_the_array_and_the_dependency() -> None:
    shard = (SLURM / "shard.sbatch").read_text(encoding="utf-8")
    merge = (SLURM / "merge.sbatch").read_text(encoding="utf-8")
    submit = (SLURM / "submit.sh").read_text(encoding="utf-8")
    assert re.search(r"^#SBATCH --array=1-\d+$", shard, re.M)
    assert re.search(r"^#SBATCH --exclusive$", shard, re.M)
    assert "$SLURM_ARRAY_TASK_ID" in shard and "$SLURM_ARRAY_TASK_COUNT" in shard
    assert re.search(r"^#SBATCH ", merge, re.M)
    assert re.search(r"sbatch --parsable .*shard\.sbatch", submit)
    assert re.search(r'sbatch --parsable --dependency="afterany:\$ARRAY_JOB" .*merge\.sbatch',
                     submit)


def test_readme_links_resolve() -> None:
    assert not broken_links(EXAMPLES / "README.md")


# --- a real run -----------------------------------------------------------------------------

# One process, one value per cell. The tasks are inference and jacobian rather than
# inference and fwd: each of the 2 shards then has cells both under the cost-balanced split
# and under the older split by a hash of the cell's name, which put all four
# inference/fwd cells of toy in shard 2 and left shard 1 empty (`no cell matches`).
TINY_FLAGS = ("--fast --values 1 --warmups 0 --min-time 0.001 --tools pt,ptnice "
              "--tasks inference,jacobian")


def run_nightly(tmp_path: Path, script: Path = NIGHTLY,
                **variables: str) -> subprocess.CompletedProcess[str]:
    """An examples/ script (nightly.sh unless `script`) from the repository root, with this
    environment's run-benchmarks first on PATH."""
    command = run_benchmarks_command()
    if len(command) == 1:
        bin_dir = str(Path(command[0]).parent)
    else:   # no installed script: a stand-in that runs this interpreter's kscperf
        shim = tmp_path / "bin"
        shim.mkdir(exist_ok=True)
        (shim / COMMAND).write_text(f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n')
        (shim / COMMAND).chmod(0o755)
        bin_dir = str(shim)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUITE", "SHARDS", "RESULTS", "BUILD", "RUN_FLAGS", "NEW_PYTHON",
                        "AB_BUDGET")}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.update(variables)
    return subprocess.run(["bash", str(script)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def cell_names(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(c["model"], c["tool"], c["task"]) for c in doc["kscperf"]["cells"]}


@pytest.mark.slow
def test_nightly_sh_runs_twice_and_compares_with_the_last_nightly(tmp_path: Path) -> None:
    results = tmp_path / "nightly"
    common = {"SUITE": str(DEFS / "toy.py"), "SHARDS": "2", "RESULTS": str(results),
              "RUN_FLAGS": TINY_FLAGS}
    expected = {("toy", tool, task)
                for tool in ("pt", "ptnice") for task in ("inference", "jacobian")}

    first = run_nightly(tmp_path, BUILD="one", **common)
    assert first.returncode == 0, explain(first)
    assert "no last nightly" in first.stderr
    assert cell_names(load_doc(results / "one.json")) == expected
    assert (results / "one.html").is_file()
    assert load_doc(results / "last-nightly.json")["metadata"]["build"] == "one"

    second = run_nightly(tmp_path, BUILD="two", **common)
    assert second.returncode == 0, explain(second)
    assert f"last nightly: {results / 'last-nightly.json'}" in second.stderr, explain(second)
    baseline = results / "shards" / "two" / "last-nightly.json"
    assert load_doc(baseline)["metadata"]["build"] == "one"
    assert str(baseline) in second.stdout, "no comparison with the last nightly\n" + explain(second)
    assert "no regression against the last nightly" in second.stderr

    merged = load_doc(results / "two.json")
    assert merged["metadata"]["build"] == "two"
    assert cell_names(merged) == expected
    assert all(c["status"] == "ok" for c in merged["kscperf"]["cells"])
    shard_cells = [cell_names(load_doc(results / "shards" / "two" / f"shard-{i}-of-2.json"))
                   for i in (1, 2)]
    assert all(shard_cells) and not shard_cells[0] & shard_cells[1]
    html = (results / "two.html").read_text(encoding="utf-8")
    assert "two" in html and "one" in html
    assert load_doc(results / "last-nightly.json")["metadata"]["build"] == "two"
    # Both nights are in the store, in order, and on the dashboard.
    assert len(list((results / "history" / "builds").glob("*.json"))) == 2
    assert "one" in (results / "dashboard" / "index.html").read_text(encoding="utf-8")

    again = run_nightly(tmp_path, BUILD="two", **common)
    assert again.returncode == 2 and "exists already" in again.stderr, explain(again)


@pytest.mark.slow
def test_nightly_sh_fails_and_says_so_when_a_cell_goes_bad(tmp_path: Path) -> None:
    results = tmp_path / "nightly"
    proc = run_nightly(tmp_path, BUILD="bad", SUITE=str(DEFS / "wrong.py"), SHARDS="1",
                       RESULTS=str(results),
                       RUN_FLAGS="--fast --values 1 --warmups 0 --min-time 0.001 "
                                 "--tools pt,ptnice --tasks inference")
    assert proc.returncode == 1, explain(proc)
    assert "FAILED: a cell went bad" in proc.stderr, explain(proc)
    assert (results / "bad.json").is_file() and (results / "bad.html").is_file()


@pytest.mark.slow
def test_nightly_ab_sh_runs_in_lockstep_with_the_last_nightly(tmp_path: Path) -> None:
    results = tmp_path / "nightly"
    common = {"SUITE": str(DEFS / "toy.py"), "RESULTS": str(results),
              "NEW_PYTHON": sys.executable, "AB_BUDGET": "20",
              "RUN_FLAGS": "--processes 2 --values 2 --warmups 0 --min-time 0.001 "
                           "--tools pt --tasks inference"}

    first = run_nightly(tmp_path, NIGHTLY_AB, BUILD="one", **common)
    assert first.returncode == 0, explain(first)
    assert (results / "one.json").is_file() and (results / "one.html").is_file()
    assert (results / "last-nightly.env").read_text() == f"build=one\npython={sys.executable}\n"

    second = run_nightly(tmp_path, NIGHTLY_AB, BUILD="two", **common)
    # Two builds of one code, two values each: a timing verdict is noise, and on a busy
    # machine it can be "slower"; the script must then say so, and nothing else may fail.
    assert second.returncode == 0 or (
        second.returncode == 1 and "FAILED: two regressed against one" in second.stderr
        and "cell went bad" not in second.stderr), explain(second)
    assert "lockstep: one" in second.stderr, explain(second)
    night = results / "ab" / "two"
    base, new = load_doc(night / "one.json"), load_doc(night / "two.json")
    assert base["metadata"]["lockstep_id"] == new["metadata"]["lockstep_id"]
    # Run until resolved, within the nightly's budget.
    assert base["metadata"]["lockstep_stopping"] == "until-resolved"
    assert base["metadata"]["lockstep_budget_s"] == 20
    assert load_doc(results / "two.json")["metadata"]["build"] == "two"
    assert load_doc(results / "last-nightly.json")["metadata"]["build"] == "two"

    third = run_nightly(tmp_path, NIGHTLY_AB, BUILD="three", **common)
    assert third.returncode in (0, 1) and "cell went bad" not in third.stderr, explain(third)
    assert "lockstep: two" in third.stderr, explain(third)
    # Nights two and three each added their ab folder: a link from the night before.
    with history.open_store(str(results / "history")) as store:
        builds = {b.id: b.label for b in store.builds()}
        (cls,) = store.machine_classes()
        linked = {(builds[link.base_id], builds[link.new_id])
                  for by_new in store.links(cls).values() for link in by_new.values()}
    assert linked == {("one", "two"), ("two", "three")}
    assert len(list((results / "history" / "links").glob("*.json"))) == 2
    assert "Lockstep timeline" in "".join(
        p.read_text() for p in (results / "dashboard" / "benchmarks").glob("*.html"))

    # The last nightly's environment is gone: a plain run, compared with its file.
    (results / "last-nightly.env").write_text("build=three\npython=/nonexistent/python\n")
    fourth = run_nightly(tmp_path, NIGHTLY_AB, BUILD="four", **common)
    assert fourth.returncode == 0 or (
        fourth.returncode == 1 and "FAILED: four regressed" in fourth.stderr
        and "cell went bad" not in fourth.stderr), explain(fourth)
    assert "is gone: a plain run" in fourth.stderr
    assert str(results / "last-nightly.json") in fourth.stdout, explain(fourth)
    assert len(list((results / "history" / "builds").glob("*.json"))) == 4
    assert len(list((results / "history" / "links").glob("*.json"))) == 2
    assert (results / "dashboard" / "index.html").is_file()


# A stand-in for sbatch: runs the job at once, in the foreground, as Slurm would run it
# later (an array task by task), writes its output and exit status to $FAKE_SLURM, and prints
# the job id as `sbatch --parsable` does on a cluster with a name.
FAKE_SBATCH = """#!/bin/bash
set -u
array=""
while [ $# -gt 1 ]; do
    case $1 in
        --array=*) array=${1#--array=} ;;
        --parsable | --dependency=afterany:*) ;;
        *) echo "fake sbatch: unexpected option $1" >&2; exit 1 ;;
    esac
    shift
done
id=$(cat "$FAKE_SLURM/next-id" 2>/dev/null || echo 100)
echo $((id + 1)) > "$FAKE_SLURM/next-id"
if [ -n "$array" ]; then
    first=${array%-*} last=${array#*-}
    t=$first
    while [ "$t" -le "$last" ]; do
        status=0
        SLURM_JOB_ID=$id SLURM_ARRAY_JOB_ID=$id SLURM_ARRAY_TASK_ID=$t \\
            SLURM_ARRAY_TASK_COUNT=$((last - first + 1)) bash "$1" \\
            > "$FAKE_SLURM/job-$id-$t.out" 2>&1 || status=$?
        echo "$status" > "$FAKE_SLURM/job-$id-$t.status"
        t=$((t + 1))
    done
else
    status=0
    SLURM_JOB_ID=$id bash "$1" > "$FAKE_SLURM/job-$id.out" 2>&1 || status=$?
    echo "$status" > "$FAKE_SLURM/job-$id.status"
fi
echo "$id;cluster"
"""


# Two processes per cell, as lockstep needs; four cells, two a shard.
AB_FLAGS = ("--processes 2 --values 1 --warmups 0 --min-time 0.001 --tools pt,ptnice "
            "--tasks inference,jacobian")


@pytest.mark.slow
def test_slurm_scripts_run_under_a_stand_in_for_sbatch(tmp_path: Path) -> None:
    """Night one plain, night two in lockstep with it, night three plain again once the
    last build's environment is gone."""
    venv = Path(sys.executable).parent.parent
    if not (venv / "bin" / "activate").is_file() or len(run_benchmarks_command()) != 1:
        pytest.skip("the tests do not run from a virtual environment with run-benchmarks")
    fake = tmp_path / "slurm"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "sbatch").write_text(FAKE_SBATCH)
    (fake / "bin" / "sbatch").chmod(0o755)
    results = tmp_path / "nightly"
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUITE", "SHARDS", "RESULTS", "BUILD", "RUN_FLAGS", "BALANCE",
                        "AB_BUDGET", "BASE_BUILD", "BASE_PYTHON")}
    env.update(PATH=f"{fake / 'bin'}{os.pathsep}{env.get('PATH', '')}", FAKE_SLURM=str(fake),
               SUITE=str(DEFS / "toy.py"), SHARDS="2", RESULTS=str(results),
               RUN_FLAGS=AB_FLAGS, KSCPERF_VENV=str(venv), AB_BUDGET="4")

    def submit(build: str) -> tuple[str, str]:
        proc = subprocess.run(["bash", str(SLURM / "submit.sh")], cwd=ROOT,
                              env={**env, "BUILD": build}, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, explain(proc)
        m = re.search(r"array job (\d+) \(1-2\), merge in job (\d+)$", proc.stdout.strip())
        assert m, explain(proc)
        array_job, merge_job = int(m.group(1)), int(m.group(2))
        outputs = {p.name: p.read_text() for p in fake.glob(f"job-{array_job}-*.out")}
        merge_out = outputs[f"job-{merge_job}.out"] = (fake / f"job-{merge_job}.out").read_text()
        for name in [f"job-{array_job}-1", f"job-{array_job}-2"]:
            assert (fake / f"{name}.status").read_text().strip() == "0", outputs
        # Two builds of one code: a timing verdict is noise, and may be a regression; the
        # merge job must then say so, and nothing else may fail.
        assert (fake / f"job-{merge_job}.status").read_text().strip() == "0" or (
            "FAILED: compare found a regression" in merge_out
            and "cell went bad" not in merge_out), outputs
        return proc.stderr, merge_out

    submit("one")
    assert load_doc(results / "last-nightly.json")["metadata"]["build"] == "one"
    assert (results / "last-nightly.env").read_text() == f"build=one\npython={venv}/bin/python\n"

    stderr, merge_out = submit("two")
    assert "lockstep: one" in stderr
    merged = load_doc(results / "two.json")
    assert merged["metadata"]["build"] == "two" and len(cell_names(merged)) == 4
    assert merged["metadata"]["lockstep_role"] == "new"
    assert (results / "two.html").is_file()
    assert load_doc(results / "last-nightly.json")["metadata"]["build"] == "two"
    assert len(list((results / "history" / "builds").glob("*.json"))) == 2
    assert len(list((results / "history" / "links").glob("*.json"))) == 1
    assert (results / "dashboard" / "index.html").is_file()
    # The shards balanced by the copy of build one; the merge job compared the pair.
    baseline = results / "shards" / "two" / "last-nightly.json"
    assert load_doc(baseline)["metadata"]["build"] == "one"
    assert all(load_doc(results / "shards" / "two" / f"shard-{i}-of-2" / "two.json")
               ["metadata"]["shard_balance"] == baseline.name for i in (1, 2))
    assert str(results / "ab" / "two" / "one.json") in merge_out

    # The last build's environment is gone: plain shards, compared with its file.
    (results / "last-nightly.env").write_text("build=two\npython=/nonexistent/python\n")
    stderr, merge_out = submit("three")
    assert "is gone: plain shards" in stderr and "lockstep" not in stderr
    assert str(results / "shards" / "three" / "last-nightly.json") in merge_out
    assert len(list((results / "history" / "builds").glob("*.json"))) == 3
    assert len(list((results / "history" / "links").glob("*.json"))) == 1
