"""The investigation stage: `run-benchmarks bisect`, from a step between two builds to the
commit that made it, with lockstep comparisons (docs/method.md, "Bisecting a step").

Owns the commits of a range and their builds in a cache of worktrees (`builds`), the
search over them, as data, from probe verdicts (`search`), and driving the lockstep
comparisons, with a state file that a bisect resumes from (`drive`). Times nothing itself:
every comparison is a session of `kscperf.orchestrator`. May import: the vocabulary,
`kscperf.plan`, `kscperf.orchestrator`, `kscperf.stats` and `kscperf.results`. Renders
nothing.
"""
