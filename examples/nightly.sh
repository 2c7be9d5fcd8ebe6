#!/usr/bin/env bash
# The nightly pipeline on one machine: run the shards of one build, merge them, compare the
# build with the last nightly, write the HTML report. On one machine the shards run one after
# another, so this is only a rehearsal of a CI matrix or a Slurm array (see
# github-actions/nightly.yml and slurm/ beside this file): use it to try the pipeline
# without CI.
#
#   examples/nightly.sh                          # from the repository root
#   SHARDS=2 RESULTS=/tmp/nightly examples/nightly.sh
#   RUN_FLAGS= examples/nightly.sh               # the default profile instead of --fast
#
# Variables, with their defaults:
#   SUITE      definition files or folders, separated by spaces      bench_defs
#   SHARDS     number of shards                                      3
#   RESULTS    folder of the nightly files                           nightly
#   BUILD      the build's label                                     git short commit, else a UTC timestamp
#   RUN_FLAGS  profile and selection flags of every shard            --fast
#
# It writes RESULTS/shards/BUILD/shard-I-of-N.json (one per shard), RESULTS/BUILD.json (the
# merged build), RESULTS/BUILD.html (the report; with a last nightly, its comparison with
# it), RESULTS/last-nightly.json (a copy of the last nightly: this build, once merged), the
# history store RESULTS/history/ and the dashboard RESULTS/dashboard/index.html.
# The shards of one build all get the same SUITE, RUN_FLAGS and --balance file (the last
# nightly, when there is one), as merge requires.
#
# Exit status: 0 when every cell is ok and nothing regressed; 1 when a cell went bad
# (incorrect, failed, timed out, crashed or out of memory), when compare found a regression,
# or when the build could not be compared with the last nightly (the files are written all
# the same, and the last lines say which); else the status of the step that stopped it
# (2: bad usage or unreadable input, 130: interrupted).

set -euo pipefail

SUITE=${SUITE:-bench_defs}
SHARDS=${SHARDS:-3}
RESULTS=${RESULTS:-nightly}
RUN_FLAGS=${RUN_FLAGS-"--fast"}
if [ -z "${BUILD:-}" ]; then
    BUILD=$(git rev-parse --short HEAD 2>/dev/null) || BUILD=$(date -u +%Y%m%d-%H%M%S)
fi

say() { printf 'nightly: %s\n' "$*" >&2; }

case $SHARDS in
    '' | *[!0-9]* | 0*) say "SHARDS must be a whole number from 1, not '$SHARDS'"; exit 2 ;;
esac
case $BUILD in
    '' | */* | .*) say "BUILD must be a file name (no '/', not starting with '.'), not '$BUILD'"; exit 2 ;;
esac
read -r -a suite <<< "$SUITE"
read -r -a run_flags <<< "$RUN_FLAGS"

merged="$RESULTS/$BUILD.json"
report="$RESULTS/$BUILD.html"
shard_dir="$RESULTS/shards/$BUILD"
if [ -e "$merged" ]; then
    say "$merged exists already: give this build another label (BUILD=...)"
    exit 2
fi
mkdir -p "$shard_dir"

# The last nightly: the baseline of compare, and the expected costs that balance the shards.
# The shards and the comparison read this copy, made before the run; the new build replaces
# it once merged.
last=""
if [ -f "$RESULTS/last-nightly.json" ]; then
    last="$shard_dir/last-nightly.json"
    cp "$RESULTS/last-nightly.json" "$last"
    say "last nightly: $RESULTS/last-nightly.json (copied to $last)"
else
    say "no last nightly in $RESULTS: nothing to balance the shards by or to compare with"
fi

# The shards. On a CI matrix or a Slurm array each runs on its own machine (of one class).
# Exit 1 (a cell went bad) still wrote the shard's results: carry on, and remember it.
shard_files=()
bad_shards=""
i=1
while [ "$i" -le "$SHARDS" ]; do
    shard_file="$shard_dir/shard-$i-of-$SHARDS.json"
    say "shard $i/$SHARDS of build $BUILD -> $shard_file"
    status=0
    if [ -n "$last" ]; then
        run-benchmarks run "${suite[@]}" "${run_flags[@]}" --shard "$i/$SHARDS" --balance "$last" \
            --build "$BUILD" -o "$shard_file" --replace || status=$?
    else
        run-benchmarks run "${suite[@]}" "${run_flags[@]}" --shard "$i/$SHARDS" \
            --build "$BUILD" -o "$shard_file" --replace || status=$?
    fi
    case $status in
        0) ;;
        1) bad_shards="$bad_shards $i/$SHARDS" ;;
        *) say "shard $i/$SHARDS stopped with exit $status; nothing merged"; exit "$status" ;;
    esac
    shard_files+=("$shard_file")
    i=$((i + 1))
done

status=0
run-benchmarks merge "${shard_files[@]}" -o "$merged" || status=$?
if [ "$status" -ne 0 ]; then
    say "merge failed with exit $status"
    exit "$status"
fi
# Merged: this build is the last nightly from now on, whatever the comparison finds, so a
# regression is reported once, by the night that brought it.
cp "$merged" "$RESULTS/last-nightly.json.new"
mv "$RESULTS/last-nightly.json.new" "$RESULTS/last-nightly.json"

# The build joins the history store, kept in commit order, and the dashboard is rebuilt
# from every build the store holds (docs/dashboard.md).
run-benchmarks history add "$merged" --store "$RESULTS/history"
run-benchmarks dashboard --store "$RESULTS/history" -o "$RESULTS/dashboard"

regressed=no
compared=no
if [ -n "$last" ]; then
    status=0
    run-benchmarks compare "$last" "$merged" --fail-on-regression || status=$?
    case $status in
        0) compared=yes ;;
        1) compared=yes; regressed=yes ;;
        *) say "compare could not compare $last with $merged (exit $status)" ;;
    esac
fi

if [ "$compared" = yes ]; then
    run-benchmarks report "$last" "$merged" -o "$report"
else
    run-benchmarks report "$merged" -o "$report"
fi

failed=no
if [ -n "$bad_shards" ]; then
    say "FAILED: a cell went bad (incorrect, failed, timed out, crashed or out of memory) in shard(s)$bad_shards; see the tables above and $report"
    failed=yes
fi
if [ "$regressed" = yes ]; then
    say "FAILED: compare found a regression of $BUILD against the last nightly; see $report"
    failed=yes
fi
if [ -n "$last" ] && [ "$compared" = no ]; then
    say "FAILED: $BUILD could not be compared with the last nightly (see the error above)"
    failed=yes
fi
if [ "$failed" = yes ]; then
    exit 1
fi
if [ -n "$last" ]; then
    say "ok: $merged, every cell ok and no regression against the last nightly; report $report"
else
    say "ok: $merged, every cell ok; report $report (the first nightly: nothing to compare with)"
fi
