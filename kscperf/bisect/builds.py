"""The builds a bisect compares: the commits of a range, each checked out in a clean
worktree of a cache folder and built there once, or the ready environments of a builds
file (nightly wheels).

A commit's build is recorded beside its worktree, keyed by the build command, the Python
and the environment asked for, so that a second bisect over the same range builds nothing
again. A commit whose checkout, build command or Python fails is untestable, with the
reason; it is never blamed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Sequence

from kscperf.errors import KscperfError
from kscperf.results.fileio import write_text_atomic

__all__ = ["Commit", "Environment", "BuildRecipe", "BuildCache", "range_commits",
           "read_builds_file", "builds_file_range", "CHECKOUT_FIELD"]

# What `--env` and `--build-cmd` replace with the commit's checkout folder.
CHECKOUT_FIELD = "{checkout}"

# A build command that runs longer than this is killed, and its commit untestable.
_BUILD_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Commit:
    """One commit of the bisected range (or one entry of a builds file): its full id (the
    label, for a builds file) and its subject line."""

    sha: str
    subject: str

    @property
    def short(self) -> str:
        """The first 12 characters of the id."""
        return self.sha[:12]


@dataclass(frozen=True)
class Environment:
    """A built commit, ready to run workers: its label, the Python, the extra environment
    variables, and the folder that holds its checkout ("" for a builds file's entry)."""

    label: str
    python: str
    env: tuple[tuple[str, str], ...]
    checkout: str


@dataclass(frozen=True)
class BuildRecipe:
    """How each commit becomes an environment: the shell command run in its checkout (None:
    none), the Python (relative to the checkout or absolute; None: this one) and the
    variables, each of which may name `{checkout}`."""

    build_cmd: str | None = None
    python: str | None = None
    env: tuple[tuple[str, str], ...] = ()

    def digest(self) -> str:
        """A short digest of the recipe: a build is reused only under the same one."""
        text = json.dumps([self.build_cmd, self.python, list(self.env)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def _git(repo: str, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True,
                              timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        raise KscperfError(f"git could not run in {repo}: {exc}.") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise KscperfError(f"git {' '.join(args[:2])} failed in {repo}: {last}.")
    return proc.stdout


def _full_sha(repo: str, commit: str, option: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", commit + "^{commit}").strip()
    except KscperfError:
        raise KscperfError(f"{option} {commit} is not a commit of {repo}.") from None


def range_commits(repo: str, good: str, bad: str) -> list[Commit]:
    """The commits from `good` to `bad` of the git repository `repo`, oldest first, both
    ends included, along the first-parent line (the order they landed in). KscperfError
    when `repo` is not a repository, either end is not a commit of it, or `good` is not an
    ancestor of `bad`."""
    if not os.path.isdir(repo):
        raise KscperfError(f"--repo {repo} is not a folder.")
    _git(repo, "rev-parse", "--git-dir")
    good_sha, bad_sha = _full_sha(repo, good, "--good"), _full_sha(repo, bad, "--bad")
    if good_sha == bad_sha:
        raise KscperfError(f"--good and --bad are the same commit ({good_sha[:12]}); give the "
                           "two builds of the change.")
    if subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", good_sha, bad_sha],
                      capture_output=True).returncode != 0:
        raise KscperfError(f"--good {good} is not an ancestor of --bad {bad}; give the older "
                           "build as --good.")
    lines = _git(repo, "log", "--first-parent", "--reverse", "--format=%H %s",
                 f"{good_sha}..{bad_sha}").splitlines()
    first = _git(repo, "log", "-1", "--format=%H %s", good_sha).strip()
    commits = [Commit(*(line.split(" ", 1) + [""])[:2]) for line in [first, *lines]]
    if commits[-1].sha != bad_sha:
        raise KscperfError(f"--bad {bad} is not on the first-parent line from --good {good}; "
                           "give a merge's first-parent side.")
    return commits


def read_builds_file(path: str) -> list[tuple[Commit, Environment]]:
    """The ordered ready environments of a builds file: one per line, a label and a Python
    separated by white space, `#` starting a comment. KscperfError naming the file and line
    of a malformed entry, a repeated label or a Python that is not an executable file."""
    try:
        with open(path, encoding="utf-8") as fp:
            lines = fp.read().splitlines()
    except OSError as exc:
        raise KscperfError(f"--builds {path} cannot be read: {exc.strerror}.") from None
    out: list[tuple[Commit, Environment]] = []
    for number, raw in enumerate(lines, 1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2:
            raise KscperfError(f"{path} line {number}: expected 'LABEL PYTHON', got "
                               f"{raw.strip()!r}.")
        label, python = fields
        if any(label == c.sha for c, _ in out):
            raise KscperfError(f"{path} line {number}: label {label!r} is given twice.")
        python = os.path.abspath(os.path.join(os.path.dirname(path), python))
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise KscperfError(f"{path} line {number}: {python} is not an executable file.")
        out.append((Commit(label, ""), Environment(label, python, (), "")))
    return out


def builds_file_range(entries: Sequence[tuple[Commit, Environment]], good: str,
                      bad: str, path: str) -> list[tuple[Commit, Environment]]:
    """The entries of a builds file from label `good` to label `bad`, both included.
    KscperfError when either is missing or `good` does not come first."""
    labels = [c.sha for c, _ in entries]
    for option, label in (("--good", good), ("--bad", bad)):
        if label not in labels:
            raise KscperfError(f"{option} {label} is not a label of {path}.")
    i, j = labels.index(good), labels.index(bad)
    if i >= j:
        raise KscperfError(f"--good {good} comes after --bad {bad} in {path}; list the "
                           "builds oldest first.")
    return list(entries[i:j + 1])


def _substituted(text: str, checkout: str) -> str:
    return text.replace(CHECKOUT_FIELD, checkout)


class BuildCache:
    """The worktrees and build records of one repository under `cache_dir`: `prepare`
    checks a commit out and builds it once per recipe; later calls reuse both."""

    def __init__(self, cache_dir: str, repo: str, recipe: BuildRecipe) -> None:
        self.cache_dir = os.path.abspath(cache_dir)
        self.repo = os.path.abspath(repo)
        self.recipe = recipe
        self.built = 0  # builds run (not reused) by this cache object

    def checkout_dir(self, commit: Commit) -> str:
        """Where `commit` is checked out."""
        return os.path.join(self.cache_dir, "worktrees", commit.sha)

    def _record_path(self, commit: Commit) -> str:
        return os.path.join(self.cache_dir, "builds",
                            f"{commit.sha}-{self.recipe.digest()}.json")

    def checkout(self, commit: Commit) -> str:
        """The clean worktree of `commit` (made when missing); KscperfError when git cannot
        make it."""
        path = self.checkout_dir(commit)
        if os.path.isfile(os.path.join(path, ".git")):
            return path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # A folder left by a removed worktree would make `git worktree add` refuse.
        _git(self.repo, "worktree", "prune")
        if os.path.isdir(path):
            raise KscperfError(f"{path} exists but is not a worktree of {self.repo}; remove it.")
        _git(self.repo, "worktree", "add", "--detach", "--force", path, commit.sha)
        return path

    def prepare(self, commit: Commit) -> Environment | str:
        """`commit` built and ready (an `Environment`), or why it is untestable (a
        sentence): the build command failed or timed out, or the Python is missing."""
        record_path = self._record_path(commit)
        record = _read_record(record_path)
        path = self.checkout(commit)
        if record is None:
            record = self._build(commit, path)
            self.built += 1
            os.makedirs(os.path.dirname(record_path), exist_ok=True)
            write_text_atomic(record_path, json.dumps(record), "the build record")
        if not record["ok"]:
            return str(record["reason"])
        python = self._python(path)
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            return f"no Python at {python}"
        env = tuple((k, _substituted(v, path)) for k, v in self.recipe.env)
        return Environment(commit.short, python, env, path)

    def _python(self, checkout: str) -> str:
        given = self.recipe.python
        if not given:
            return sys.executable
        given = _substituted(given, checkout)
        return given if os.path.isabs(given) else os.path.join(checkout, given)

    def _build(self, commit: Commit, checkout: str) -> dict[str, object]:
        """Run the build command in `checkout`; the record of how it went."""
        cmd = self.recipe.build_cmd
        if not cmd:
            return {"ok": True, "reason": "", "seconds": 0.0, "log": ""}
        log = os.path.join(self.cache_dir, "builds", f"{commit.sha}-{self.recipe.digest()}.log")
        os.makedirs(os.path.dirname(log), exist_ok=True)
        env = dict(os.environ, **{k: _substituted(v, checkout) for k, v in self.recipe.env})
        t0 = time.monotonic()
        with open(log, "wb") as out:
            try:
                proc = subprocess.run(_substituted(cmd, checkout), shell=True, cwd=checkout,
                                      stdout=out, stderr=subprocess.STDOUT, env=env,
                                      timeout=_BUILD_TIMEOUT_S)
                code: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                code = None
        seconds = time.monotonic() - t0
        if code == 0:
            return {"ok": True, "reason": "", "seconds": seconds, "log": log}
        why = (f"the build command ran past {_BUILD_TIMEOUT_S:.0f} s" if code is None else
               f"the build command {shlex.quote(cmd)} exited {code}")
        return {"ok": False, "reason": f"{why} (log: {log})", "seconds": seconds, "log": log}


def _read_record(path: str) -> dict[str, object] | None:
    try:
        with open(path, encoding="utf-8") as fp:
            record = json.load(fp)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "ok" in record else None
