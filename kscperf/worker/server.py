"""The fork server ("zygote"): `python -m kscperf.worker --serve [--no-compilers]`.

It imports torch and the worker once, never initialises CUDA or runs a torch op (so no
thread pool or CUDA context exists to be broken by fork()), then forks one fresh child per
request read from stdin; each child runs `cell.main` on its spec and result paths.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback
import uuid
from typing import Any, NoReturn

from kscperf.results.envinfo import machine_info
from kscperf.worker import canary
from kscperf.worker.cell import PRELOAD_ALWAYS, PRELOAD_FOR_COMPILERS, main, preload

__all__ = ["serve"]


def _serve_child(request: dict[str, Any], protocol_fds: tuple[int, int], zygote: str) -> None:
    try:
        os.setsid()
        for fd in protocol_fds:
            os.close(fd)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        code = main(request["spec"], request["result"], zygote=zygote)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _share_per_worker_setup() -> None:
    # Done once here instead of in every child (measured 40-90 ms a child on a busy 2-core
    # VM): psutil's import and platform's `uname -p` subprocess, which machine_info caches;
    # numpy.random's import; the canary's inputs. None of it runs a torch op.
    machine_info()
    canary.prepare()


def serve(preload_compilers: bool = True) -> NoReturn:
    """The fork server loop: one JSON request per stdin line ({"spec", "result", "log"});
    answers {"pid"} when the child starts and {"pid", "status", "maxrss_kb"} when it ends.
    `preload_compilers` imports torch.compile's machinery too, for plans that use it. Exits
    the process when stdin closes."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    # Anything a library prints must not land in the protocol stream.
    os.dup2(2, 1)
    reader = os.fdopen(proto_in, "r", encoding="utf-8")

    def reply(obj: dict[str, Any]) -> None:
        os.write(proto_out, (json.dumps(obj) + "\n").encode())

    preload(PRELOAD_ALWAYS + (PRELOAD_FOR_COMPILERS if preload_compilers else ()))
    _share_per_worker_setup()
    # Children inherit these objects; frozen, their collections skip them and their pages
    # stay shared instead of being copied when the collector touches them.
    gc.collect()
    gc.freeze()
    # Every child inherits this server's memory layout and state: its id in each result
    # lets `compare` take the zygote, not the process, as the unit of a single-shot kind.
    zygote = uuid.uuid4().hex[:12]
    reply({"ready": True, "pid": os.getpid()})
    for line in reader:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _serve_child(request, (proto_in, proto_out), zygote)
        reply({"pid": pid})
        _, status, rusage = os.wait4(pid, 0)
        reply({"pid": pid, "status": status, "maxrss_kb": rusage.ru_maxrss})
    # Stdin closed: the run is over. Nothing here needs cleaning up, and finalizing an
    # interpreter that holds torch took 0.15-0.25 s of every run's wall time.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
