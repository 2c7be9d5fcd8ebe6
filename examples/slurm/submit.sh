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
#   KSCPERF_VENV  virtual environment with torch and kscperf         .venv
#
# The jobs run in the directory this is started from. The last nightly is
# RESULTS/last-nightly.json; it is copied now into the build's folder, so that every shard
# balances by the same file and the merge job compares with it, even if a later build
# replaces it meanwhile.

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export SUITE=${SUITE:-bench_defs}
export RUN_FLAGS=${RUN_FLAGS:-}
export SHARDS=${SHARDS:-3}
export RESULTS=${RESULTS:-nightly}
export KSCPERF_VENV=${KSCPERF_VENV:-.venv}
if [ -z "${BUILD:-}" ]; then
    BUILD=$(git rev-parse --short HEAD 2>/dev/null) || BUILD=$(date -u +%Y%m%d-%H%M%S)
fi
export BUILD

case $SHARDS in
    '' | *[!0-9]* | 0*) echo "submit: SHARDS must be a whole number from 1, not '$SHARDS'" >&2; exit 2 ;;
esac
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

# --parsable prints "JOBID" or "JOBID;CLUSTER".
ARRAY_JOB=$(sbatch --parsable --array="1-$SHARDS" "$here/shard.sbatch")
ARRAY_JOB=${ARRAY_JOB%%;*}
MERGE_JOB=$(sbatch --parsable --dependency="afterany:$ARRAY_JOB" "$here/merge.sbatch")
MERGE_JOB=${MERGE_JOB%%;*}
echo "build $BUILD: shards in array job $ARRAY_JOB (1-$SHARDS), merge in job $MERGE_JOB"
