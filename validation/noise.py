"""truth-check's machine noise section: one fixed workload (no kscperf) timed in fresh
interpreters, how far this machine's speed moves between processes, and timed every ~10 ms in
one process, how its speed switches between states over time."""

from __future__ import annotations

import statistics
import subprocess
import sys

# The fixed workload, in a fresh interpreter: the median of ten timings of 20 calls.
NOISE_PROBE = """
import statistics, sys, time, torch
torch.manual_seed(0)
x = torch.randn(4096)
def chain():
    y = x
    for _ in range(100):
        y = torch.sin(y)
values = []
for _ in range(10):
    t0 = time.perf_counter()
    for _ in range(20):
        chain()
    values.append((time.perf_counter() - t0) / 20)
print(statistics.median(values))
"""


STATES_PROBE = """
import sys, time, torch
torch.set_num_threads(1)
x = torch.randn(4096)
values = []
end = time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    t0 = time.perf_counter()
    for _ in range(10):
        y = x
        for _ in range(100):
            y = torch.sin(y)
    values.append((time.perf_counter() - t0) / 10)
print(" ".join(map(repr, values)))
"""


def machine_states(seconds: float) -> None:
    """One fixed workload timed every ~10 ms in one process: whether this machine's speed
    switches between states, how far apart they are and how long each lasts."""
    out = subprocess.run([sys.executable, "-c", STATES_PROBE, str(seconds)],
                         capture_output=True, text=True, check=True)
    values = [float(v) for v in out.stdout.split()]
    ordered = sorted(values)
    p10, p90 = ordered[len(ordered) // 10], ordered[(9 * len(ordered)) // 10]
    threshold = (p10 * p90) ** 0.5
    slow = [v > threshold for v in values]
    stretches = 1 + sum(a != b for a, b in zip(slow, slow[1:]))
    longest, run = 1, 1
    for a, b in zip(slow, slow[1:]):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    step = seconds / len(values)
    print(f"\n== machine states: one workload timed every {step * 1e3:.0f} ms for "
          f"{seconds:g} s in one process ==")
    print(f"10th percentile {p10 * 1e6:.0f} µs, 90th {p90 * 1e6:.0f} µs ({p90 / p10:.2f}x); "
          f"slow (above {threshold * 1e6:.0f} µs) {sum(slow) / len(slow):.0%} of the time, in "
          f"{stretches} stretches, the longest {longest * step:.1f} s")


def machine_noise(processes: int) -> None:
    """The same fixed work timed in fresh interpreters, without kscperf: how much this
    machine's speed differs from one process to the next (and over time)."""
    medians = []
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-c", NOISE_PROBE], capture_output=True,
                             text=True, check=True)
        medians.append(float(out.stdout))
    low, high = min(medians), max(medians)
    spread = statistics.stdev(medians) / statistics.mean(medians)
    print(f"\n== machine noise: one fixed workload in {processes} fresh processes, "
          "no kscperf ==")
    print("process medians: " + ", ".join(f"{m * 1e6:.0f}" for m in medians) + " µs")
    print(f"slowest / fastest {high / low:.2f}x, process-to-process spread "
          f"(std/mean) {spread:.1%}")
