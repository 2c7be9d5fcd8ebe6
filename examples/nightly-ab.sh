#!/usr/bin/env bash
# The nightly on a noisy machine: every build keeps its own environment, and each night the
# new build runs in lockstep with the last nightly's environment (`run-benchmarks ab`), so
# that a change of the machine's own speed lands on both builds alike. Use it where separate
# nightly runs report `machine changed` or leave changes `machine-shift` (docs/cli.md, "When
# the machine changed"). Where the last nightly's environment is gone, it falls back to a
# plain run compared with the last nightly's file, as nightly.sh does.
#
#   NEW_PYTHON=~/envs/nightly-2026-11-30/bin/python examples/nightly-ab.sh
#   RESULTS=/tmp/nightly BUILD=b2 examples/nightly-ab.sh
#
# Variables, with their defaults:
#   NEW_PYTHON  the Python of this build's environment: torch and the code   python3 on PATH
#               under test installed; keep the environment until the next night has run
#   SUITE       definition files or folders, separated by spaces             bench_defs
#   RESULTS     folder of the nightly files                                  nightly-ab
#   BUILD       the build's label                                            git short commit, else a UTC timestamp
#   RUN_FLAGS   profile and selection flags (ab pairs processes: keep at     (none: the default profile)
#               least 2 per cell, so not --fast)
#   AB_BUDGET   seconds the lockstep run may take: it adds process pairs     1800
#               to every cell whose verdict is still open until each is
#               resolved (`ab --until-resolved`), and starts none after this
#
# It keeps RESULTS/last-nightly.json (the last build's file) and RESULTS/last-nightly.env (its
# label and Python), and writes RESULTS/BUILD.json (this build's file), RESULTS/BUILD.html (the
# report), from `ab` RESULTS/ab/BUILD/ with both builds' files of that night (added to the
# history store as a lockstep link), the history store RESULTS/history/ and the dashboard
# RESULTS/dashboard/index.html.
#
# Exit status: 0 when every cell is ok and nothing regressed; 1 when a cell went bad or the
# comparison found a regression (the files are written all the same); 2 for bad usage; else
# the status of the step that stopped it.

set -euo pipefail

SUITE=${SUITE:-bench_defs}
RESULTS=${RESULTS:-nightly-ab}
RUN_FLAGS=${RUN_FLAGS-}
AB_BUDGET=${AB_BUDGET:-1800}
NEW_PYTHON=${NEW_PYTHON:-$(command -v python3)}
if [ -z "${BUILD:-}" ]; then
    BUILD=$(git rev-parse --short HEAD 2>/dev/null) || BUILD=$(date -u +%Y%m%d-%H%M%S)
fi

say() { printf 'nightly-ab: %s\n' "$*" >&2; }

case $BUILD in
    '' | */* | .*) say "BUILD must be a file name (no '/', not starting with '.'), not '$BUILD'"; exit 2 ;;
esac
if ! "$NEW_PYTHON" -c 'import torch' >/dev/null 2>&1; then
    say "NEW_PYTHON=$NEW_PYTHON cannot import torch: point it at this build's environment"
    exit 2
fi
read -r -a suite <<< "$SUITE"
read -r -a run_flags <<< "$RUN_FLAGS"
mkdir -p "$RESULTS"
out="$RESULTS/$BUILD.json"
report="$RESULTS/$BUILD.html"
if [ -e "$out" ]; then
    say "$out exists already: give this build another label (BUILD=...)"
    exit 2
fi

# The last nightly: its label and Python, one NAME=VALUE per line.
last_build="" last_python=""
if [ -f "$RESULTS/last-nightly.env" ]; then
    while IFS='=' read -r name value; do
        case $name in
            build) last_build=$value ;;
            python) last_python=$value ;;
        esac
    done < "$RESULTS/last-nightly.env"
fi

bad=no regressed=no night=""
if [ -n "$last_python" ] && [ "$last_build" != "$BUILD" ] \
        && "$last_python" -c 'import torch' >/dev/null 2>&1; then
    say "lockstep: $last_build ($last_python) against $BUILD ($NEW_PYTHON)"
    night="$RESULTS/ab/$BUILD"
    status=0
    run-benchmarks ab "${suite[@]}" "${run_flags[@]}" --base-python "$last_python" \
        --base-build "$last_build" --new-python "$NEW_PYTHON" --new-build "$BUILD" \
        --until-resolved --budget "$AB_BUDGET" -o "$night" --replace --report "$report" \
        || status=$?
    case $status in
        0) ;;
        1) bad=yes ;;
        *) say "ab stopped with exit $status"; exit "$status" ;;
    esac
    cp "$night/$BUILD.json" "$out"
    # The regression status alone: ab has printed the comparison already.
    status=0
    run-benchmarks compare "$night/$last_build.json" "$out" --fail-on-regression \
        --format json > /dev/null || status=$?
    case $status in
        0) ;;
        1) regressed=yes ;;
        *) say "compare could not compare the two builds of $night (exit $status)"; exit "$status" ;;
    esac
else
    if [ -n "$last_python" ]; then
        say "the last nightly's Python ($last_python) is gone: a plain run, compared with its file"
    fi
    status=0
    run-benchmarks run "${suite[@]}" "${run_flags[@]}" --build "$BUILD" -o "$out" \
        --replace || status=$?
    case $status in
        0) ;;
        1) bad=yes ;;
        *) say "run stopped with exit $status"; exit "$status" ;;
    esac
    if [ -f "$RESULTS/last-nightly.json" ]; then
        status=0
        run-benchmarks compare "$RESULTS/last-nightly.json" "$out" --fail-on-regression \
            || status=$?
        case $status in
            0) ;;
            1) regressed=yes ;;
            *) say "compare could not compare the last nightly with $out (exit $status)" ;;
        esac
        run-benchmarks report "$RESULTS/last-nightly.json" "$out" -o "$report"
    else
        run-benchmarks report "$out" -o "$report"
    fi
fi

# This build is the last nightly from now on: its file, and its environment for tomorrow.
cp "$out" "$RESULTS/last-nightly.json.new"
mv "$RESULTS/last-nightly.json.new" "$RESULTS/last-nightly.json"
printf 'build=%s\npython=%s\n' "$BUILD" "$NEW_PYTHON" > "$RESULTS/last-nightly.env"

# The build joins the history store and the dashboard is rebuilt (docs/dashboard.md). A
# lockstep night adds its ab folder: the new build and its link from the last one (the
# paired ratios, which the machine's own speed cannot move), the strongest evidence of a
# change there is. A plain night adds the build's file; a change of the machine's speed
# since the night before is then marked as an event, not a change of any build.
to_add=$out
if [ -n "${night:-}" ] && [ -f "$night/$BUILD.json" ]; then
    to_add=$night
fi
if ! run-benchmarks history add "$to_add" --store "$RESULTS/history"; then
    # A store that lacks the last build (new, or rebuilt elsewhere) takes this one alone.
    [ "$to_add" = "$out" ] && exit 2
    say "the store does not take the lockstep link: adding $out without it"
    run-benchmarks history add "$out" --store "$RESULTS/history"
fi
run-benchmarks dashboard --store "$RESULTS/history" -o "$RESULTS/dashboard"

if [ "$bad" = yes ]; then
    say "FAILED: a cell went bad (incorrect, failed, timed out, crashed or out of memory); see $report"
fi
if [ "$regressed" = yes ]; then
    say "FAILED: $BUILD regressed against $last_build; see $report"
fi
if [ "$bad" = yes ] || [ "$regressed" = yes ]; then
    exit 1
fi
say "ok: $out, every cell ok and no regression; report $report"
