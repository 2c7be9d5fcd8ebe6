"""truth-check's agreement section: kscperf's median for each `pt` inference cell of the
shipped suite beside torch.utils.benchmark.Timer.blocked_autorange on the same callable and
input, interleaved in rounds, with the CPU time the hypervisor stole meanwhile."""

from __future__ import annotations

import os
import statistics
from typing import Any

import kscperf
from kscperf.names import benchmark_name
from validation.common import ROOT, run_build


def _steal_fraction() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs so far: the time a hypervisor gave to others."""
    with open("/proc/stat", encoding="ascii") as fp:
        fields = [int(v) for v in fp.readline().split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def _timer_median(fn: Any, args: tuple[Any, ...], threads: int, pin: int | None) -> float:
    """Timer.blocked_autorange's median for `fn(*args)` in this process, in inference mode,
    on `threads` torch threads (and only on CPU `pin`, when given)."""
    import torch

    from kscperf.worker.timers import timer_median_s

    before = os.sched_getaffinity(0)
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    try:
        with torch.inference_mode():
            # Called as kscperf's worker calls it: a closure over the inputs.
            return timer_median_s(lambda: fn(*args), min_run_time=1.0, num_threads=threads)
    finally:
        os.sched_setaffinity(0, before)


def agreement(tmp: str, profile: str, only: set[str], rounds: int, pin: int | None) -> None:
    """Model by model, kscperf's run and then Timer on the same inputs, back to back, so that
    slow drift of the machine (other tenants of a VM host) lands on both alike; `rounds`
    times over, interleaved, each benchmark's ratio the median of its rounds'. `only`
    (MODEL or MODEL/CONFIG names) narrows the cells; `pin` runs both on that one CPU with
    one torch thread (kscperf's workers through --affinity)."""
    import torch

    from kscperf.plan.definitions import find_definition_files, import_definition_module, \
        resolve_model, scan_models
    from kscperf.worker.configs import load_configs

    models, _ = scan_models(find_definition_files([str(ROOT / "bench_defs")]))
    models = [m for m in models if not only or any(o.split("/")[0] == m.name for o in only)]
    where = f"both on CPU {pin}, one thread" if pin is not None else "same thread count"
    print(f"\n== agreement: kscperf ({profile} profile) against "
          f"torch.utils.benchmark blocked_autorange, pt inference, {where}, "
          f"{rounds} interleaved round(s) ==")
    print(f"{'benchmark':42} {'kscperf':>11} {'Timer':>11} {'ratio':>7}")
    threads = 1 if pin is not None else torch.get_num_threads()
    extra: dict[str, Any] = {"affinity": (pin,)} if pin is not None else {}
    steal0 = _steal_fraction()
    seen: dict[str, list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for m in models:
            out = os.path.join(tmp, f"agreement-{m.name}.json")
            run_build("truth-check", m.module_path, patterns=(f"{m.name}/pt/inference",),
                      tools="pt", profile=profile, output=out, **extra)
            loaded = kscperf.load(out)
            model = resolve_model(import_definition_module(m.module_path), m.name)
            for name, args in load_configs(model, seed=0):
                bench = benchmark_name(m.name, "pt", "inference", name)
                values = loaded.benchmarks.get(bench)
                if not values or (only and m.name not in only
                                  and f"{m.name}/{name}" not in only):
                    continue
                seen.setdefault(bench, []).append(
                    (statistics.median(values), _timer_median(model.reference, args, threads,
                                                              pin)))
    steal1 = _steal_fraction()
    print_agreement(seen, (steal1[0] - steal0[0]) / max(1, steal1[1] - steal0[1]))


def print_agreement(seen: dict[str, list[tuple[float, float]]], steal: float) -> None:
    """Prints, per benchmark of `seen` (its (kscperf, Timer) medians per round, seconds),
    both medians, their ratio (the median of the rounds' ratios) and the rounds' ratios when
    more than one, then the largest disagreement of the cells of 10 µs or more and the share
    of CPU time `steal` the hypervisor took meanwhile."""
    worst = 0.0
    for bench, pairs in seen.items():
        ours = statistics.median(p[0] for p in pairs)
        measured = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[0] / p[1] for p in pairs)
        counted = ours >= 10e-6
        if counted:
            worst = max(worst, abs(ratio - 1))
        rounds = f"  (rounds: {', '.join(f'{p[0] / p[1]:.3f}' for p in pairs)})" \
            if len(pairs) > 1 else ""
        print(f"{bench:42} {ours * 1e6:9.1f}µs {measured * 1e6:9.1f}µs {ratio:7.3f}"
              f"{'' if counted else '  (under 10 µs: not counted)'}{rounds}")
    print(f"largest disagreement for cells >= 10 µs: {worst:.1%} (target <= 10 %); "
          f"CPU time stolen by the hypervisor meanwhile: {steal:.1%}")
