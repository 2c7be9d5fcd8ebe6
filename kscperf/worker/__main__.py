"""`python -m kscperf.worker SPEC.json RESULT.json`, or `--serve [--no-compilers]` for the
fork server."""

import sys

from kscperf.worker.cell import main
from kscperf.worker.server import serve

if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"] and len(sys.argv) <= 3:
        sys.exit(serve(preload_compilers=sys.argv[2:] != ["--no-compilers"]))
    if len(sys.argv) != 3:
        sys.stderr.write("usage: python -m kscperf.worker SPEC.json RESULT.json | "
                         "--serve [--no-compilers]\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
