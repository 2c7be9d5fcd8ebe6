"""The groups of a results file's metadata keys, named once: what identifies the machine
class, the software environment and the timing profile, and which keys belong to one
worker process rather than to the build.

Every policy that looks at metadata (which builds `compare` refuses, which shards `merge`
accepts, what makes a history series' environment, what the report lists first, what a
build's metadata leaves out, what pyperf requires of a benchmark's runs) is built here from
these groups, and says why it differs from the others. Imports nothing.
"""

from __future__ import annotations

__all__ = [
    "HOST",
    "MACHINE_CLASS",
    "SOFTWARE",
    "PROFILE",
    "BUILD_IDENTITY",
    "PYPERF_RUN_KEYS",
    "PER_RUN_KEYS",
    "ZYGOTE_KEY",
    "COMPARABLE_KEYS",
    "MERGE_KEYS",
    "SHARD_ONLY_KEYS",
    "ENVIRONMENT_KEYS",
    "COUNTER_KEYS",
    "WORKER_ENV_KEYS",
    "REPORT_KEYS",
    "SOURCE_KEYS",
]

# The one machine that ran a file. Machines of one class are interchangeable for timing,
# but a file's host is still the finest fact of where it ran.
HOST = ("hostname",)

# What makes machines interchangeable for timing: identical machines share all of these
# (shards of one build run on several of them).
MACHINE_CLASS = ("cpu_model_name", "cpu_count", "gpu_name")

# The software a worker ran on, besides the code under test.
SOFTWARE = ("torch_version", "cuda_version", "cudnn_version", "triton_version", "gpu_driver",
            "python_version")

# How each value was taken: the profile and its explicit overrides.
PROFILE = ("profile", "processes", "values", "warmups", "min_time")

# What names a build and where it came from; different in every build by design.
BUILD_IDENTITY = ("build", "build_python", "build_env", "lockstep_id", "date", "git_commit",
                  "git_dirty")

# Where the code under test came from, so that a change can be bisected: the git work tree's
# top folder, the definition paths the run was given (shell words, relative to that folder
# when inside it), 1 when the workers' PYTHONPATH held that folder (a pure-Python package
# read from its checkout) else 0, and the Python that ran the workers.
SOURCE_KEYS = ("git_toplevel", "definition_paths", "source_on_pythonpath", "source_python")

# Run metadata that pyperf requires to be identical across the runs of one benchmark (its
# `_CHECKED_METADATA`, less the keys kscperf never sets); they come from the worker's
# environment, so they are copied to each run.
PYPERF_RUN_KEYS = HOST + ("cpu_model_name", "cpu_count", "platform", "python_version")

# The id of the zygote a worker was forked from (or its own, for a worker started alone): the
# processes of one zygote share its memory layout and state, so for a kind measured once per
# process it, not the process, is the unit of replication (`compare`).
ZYGOTE_KEY = "zygote"

# Facts of one worker process, kept out of a build's metadata: the pyperf run keys (each run
# carries its own), and what differs from worker to worker by design (the Python that ran
# it, its CPUs, its lockstep partner's misses, the extensions folder of its tool, its zygote).
PER_RUN_KEYS = frozenset(PYPERF_RUN_KEYS + ("python_executable", "cpu_affinity",
                                            "lockstep_unpaired_values",
                                            "torch_extensions_dir", ZYGOTE_KEY))


def _described(keys: tuple[str, ...], what: str) -> tuple[tuple[str, str], ...]:
    return tuple((key, what) for key in keys)


# What must match for `compare` to set two builds' timings side by side: (key, what
# differs). The host rather than the class (two files of one nightly come from one machine;
# merged shards have no one host and are judged by CPU and GPU; one host has one CPU count),
# one version (torch: the others follow it, and a lockstep pair may differ in exactly that),
# and of the profile only what sets the sample sizes its test and detectable effect assume
# (processes, values): warmups and min_time change how a value is taken, not how many there
# are, and raising min_time on a noisy machine must not make two builds incomparable.
COMPARABLE_KEYS = (_described(HOST, "machines")
                   + (("cpu_model_name", "CPUs"), ("gpu_name", "GPUs"),
                      ("torch_version", "torch versions"))
                   + _described(PROFILE[:3], "profiles")
                   + (("instructions_method", "instruction counters"),
                      ("instructions_isa", "pinned vector ISAs")))

# What every shard of one build must share: the build, the machine class (not the host:
# shards run on identical machines), the torch build, the whole profile and the seed: the
# shards are one measurement cut in pieces, so all that sets how a value was taken, and the
# inputs, must be one.
MERGE_KEYS = ((("build", "build"), ("cpu_model_name", "CPU"), ("cpu_count", "CPU count"),
               ("gpu_name", "GPU"), ("torch_version", "torch version"),
               ("cuda_version", "CUDA version"))
              + tuple((key, key) for key in PROFILE + ("seed",))
              + (("instructions_method", "instruction counter"),
                 ("instructions_isa", "pinned vector ISA")))

# Facts of one shard's file, not of the merged build.
SHARD_ONLY_KEYS = ("shard", "shard_expected_s")

# What makes a build's environment in a history series: a change of any of them inside a
# series is an environment event, never a regression of the build. The whole software stack,
# the machine class and the whole profile (unlike compare, a series spans months, so a
# changed min_time is worth an event), and how workers start and find their caches. The host
# is not among them: another machine class is another series. kscperf itself too, by its
# version and a digest of its code (the version is the same for every commit): a new
# harness may time differently, and that is never the build's doing.
# The instruction counter (which one, which ISA it pinned) is among them, but only series of
# counts see it (`history.changes`): timing is the same whichever counter ran after it.
COUNTER_KEYS = ("instructions_method", "instructions_isa")
# The allocator settings of the workers' environment (`orchestrator.workerenv`): a build's
# file records its workers' values, not those of the process that ran them.
WORKER_ENV_KEYS = ("malloc_mmap_threshold", "malloc_trim_threshold", "thp_mem_alloc_enable")
ENVIRONMENT_KEYS = (SOFTWARE + MACHINE_CLASS + PROFILE + ("compile_cache", "isolation")
                    + ("kscperf_version", "kscperf_source") + COUNTER_KEYS)

# The report's environment table lists these first, in this order (what the build is, where
# and on what it ran, how it was timed); any other key follows alphabetically.
REPORT_KEYS = (BUILD_IDENTITY + HOST + MACHINE_CLASS + ("platform", "python_version",
                                                        "torch_version", "cuda_version")
               + PROFILE + ("seed", "torch_num_threads"))
