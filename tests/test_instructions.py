"""Tests of counting instructions with Callgrind (kscperf.worker.instructions): the dump's
parsing, the refusal outside Valgrind, and one real process under Valgrind on tiny calls
(skipped, with the reason, where `valgrind` is not installed)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kscperf.worker.instructions import CALLGRIND_OPTIONS, PINNED_ISA, CallgrindError, \
    callgrind_count, count_calls

_DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 19618
cmd:  python t.py 100
part: 1

positions: line
events: Ir
summary: 3025461


totals: 3025461
"""


def test_a_dump_gives_its_instruction_count_and_a_bad_one_says_what_is_wrong() -> None:
    assert callgrind_count(_DUMP, "d") == 3025461
    with pytest.raises(CallgrindError, match="d has no summary line"):
        callgrind_count(_DUMP.split("summary")[0], "d")
    with pytest.raises(CallgrindError, match="not a Callgrind dump of instructions"):
        callgrind_count(_DUMP.replace("events: Ir", "events: Dr"), "d")


def test_counting_outside_valgrind_is_refused_with_a_reason(tmp_path: Path) -> None:
    x = torch.randn(16)
    with pytest.raises(CallgrindError, match="running under valgrind --tool=callgrind"):
        count_calls(lambda: x * 2, contextlib.nullcontext, 5, str(tmp_path / "out"), 1)


_SCRIPT = """
import contextlib, json, sys, torch
from kscperf.worker.instructions import count_calls
torch.set_num_threads(1)
x = torch.randn(4096)
out = sys.argv[1]
plain = lambda: torch.relu(x) ** 2
more = lambda: torch.exp(torch.relu(x) ** 2)
counts = [count_calls(f, contextlib.nullcontext, 100, out, i + 1)
          for i, f in enumerate((plain, plain, more))]
print(json.dumps(counts))
"""


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_callgrind_counts_the_calls_alone_repeatably_and_sees_an_extra_op(
        tmp_path: Path) -> None:
    out = str(tmp_path / "callgrind.out")
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, **PINNED_ISA,
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(["valgrind", *CALLGRIND_OPTIONS, f"--callgrind-out-file={out}",
                           sys.executable, "-c", _SCRIPT, out],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plain, again, more = json.loads(proc.stdout.strip().splitlines()[-1])
    # relu(x)**2 on 4,096 floats: about 30 k instructions a call on this VM.
    assert 5_000 < plain < 500_000
    assert abs(again - plain) / plain < 0.02
    assert more > 1.5 * plain  # the exp of every element costs more than the rest
