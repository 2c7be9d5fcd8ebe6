"""work: `reps` dependent sin() passes over 4096 floats (KSCPERF_TRUTH_REPS, default 100):
about 100 µs per 100 reps on a 2-core VM, and exactly proportional work, so "20 % more
work" is 120 reps against 100. What truth-check's power trials run."""

import os
import torch


def work_bench_configs():
    yield torch.randn(4096)


def work_pytorch(x):
    reps = int(os.environ.get("KSCPERF_TRUTH_REPS", "100"))
    y = x
    for _ in range(reps):
        y = torch.sin(y)
    return y
