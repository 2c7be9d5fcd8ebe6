#!/usr/bin/env bash
# Submit one nightly build to Slurm: the shards as a job array (shard.sbatch), then the merge
# job (merge.sbatch), which starts once every shard has ended, whatever its exit.
#
#   examples/slurm/submit.sh                     # on a login node, from the repository root
#   SHARDS=8 RESULTS=/shared/nightly examples/slurm/submit.sh
#
# Variables, with their defaults (exported to the jobs: sbatch passes the environment on):
#   SUITE         definition files or folders, separated by spaces   bench_defs
#   RUN_FLAGS     profile and selection flags of every shard         none: the default profile
#   SHARDS        number of shards, the size of the array            3
#   RESULTS       folder of the nightly files, on a file system
#                 that every node sees                               nightly
#   BUILD         the build's label                                  git short commit, else a UTC timestamp
#   KSCPERF_VENV  this build's virtual environment: torch, kscperf   .venv
#                 and the code under test installed; keep it until
#                 the next night has run (lockstep runs it as the base)
#   AB_BUDGET     seconds each lockstep shard may take: it adds      1800
#                 process pairs to every cell whose verdict is still
#                 open until each is resolved (`ab --until-resolved`),
#                 and starts none after this
#
# The jobs run in the directory this is started from. The last nightly is
# RESULTS/last-nightly.json, and RESULTS/last-nightly.env its label and Python (build=,
# python=), as examples/nightly-ab.sh keeps them. Both are read now, once for every shard:
# the file is copied into the build's folder, so that every shard balances by the same file
# and the merge job compares with it, even if a later build replaces it meanwhile; and where
# the last nightly's Python still imports torch, every shard runs in lockstep with it
# (`run-benchmarks ab --shard I/N`), the merge job merges each build's shards apart into
# RESULTS/ab/BUILD/ and adds that folder to the store (a lockstep link). Otherwise the
# shards run this build alone.

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export SUITE=${SUITE:-bench_defs}
export RUN_FLAGS=${RUN_FLAGS:-}
export SHARDS=${SHARDS:-3}
export RESULTS=${RESULTS:-nightly}
export KSCPERF_VENV=${KSCPERF_VENV:-.venv}
export AB_BUDGET=${AB_BUDGET:-1800}
if [ -z "${BUILD:-}" ]; then
    BUILD=$(git rev-parse --short HEAD 2>/dev/null) || BUILD=$(date -u +%Y%m%d-%H%M%S)
fi
export BUILD

case $SHARDS in
    '' | *[!0-9]* | 0*) echo "submit: SHARDS must be a whole number from 1, not '$SHARDS'" >&2; exit 2 ;;
esac
if ! "$KSCPERF_VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
    echo "submit: KSCPERF_VENV=$KSCPERF_VENV cannot import torch: point it at this build's environment" >&2
    exit 2
fi
# Absolute: the jobs record it, and the next night runs it as its base.
KSCPERF_VENV=$(cd "$KSCPERF_VENV" && pwd)
if [ -e "$RESULTS/$BUILD.json" ]; then
    echo "submit: $RESULTS/$BUILD.json exists already: give this build another label (BUILD=...)" >&2
    exit 2
fi

build_dir="$RESULTS/shards/$BUILD"
mkdir -p "$build_dir"
rm -f "$build_dir/bad-shards.txt"
export BALANCE=""
if [ -f "$RESULTS/last-nightly.json" ]; then
    cp "$RESULTS/last-nightly.json" "$build_dir/last-nightly.json"
    BALANCE="$build_dir/last-nightly.json"
fi

# The base build: the last nightly, when its Python still imports torch.
last_build="" last_python=""
if [ -f "$RESULTS/last-nightly.env" ]; then
    while IFS='=' read -r name value; do
        case $name in
            build) last_build=$value ;;
            python) last_python=$value ;;
        esac
    done < "$RESULTS/last-nightly.env"
fi
export BASE_BUILD="" BASE_PYTHON=""
if [ -n "$last_python" ] && [ "$last_build" != "$BUILD" ] \
        && "$last_python" -c 'import torch' >/dev/null 2>&1; then
    BASE_BUILD=$last_build BASE_PYTHON=$last_python
    echo "submit: lockstep: $BASE_BUILD ($BASE_PYTHON) against $BUILD ($KSCPERF_VENV/bin/python)" >&2
elif [ -n "$last_python" ]; then
    echo "submit: the last nightly's Python ($last_python) is gone: plain shards" >&2
fi

# --parsable prints "JOBID" or "JOBID;CLUSTER".
ARRAY_JOB=$(sbatch --parsable --array="1-$SHARDS" "$here/shard.sbatch")
ARRAY_JOB=${ARRAY_JOB%%;*}
MERGE_JOB=$(sbatch --parsable --dependency="afterany:$ARRAY_JOB" "$here/merge.sbatch")
MERGE_JOB=${MERGE_JOB%%;*}
echo "build $BUILD: shards in array job $ARRAY_JOB (1-$SHARDS), merge in job $MERGE_JOB"
