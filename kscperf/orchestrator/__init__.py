"""The orchestrator: the one run loop of `run`, `check` and `ab` (`session`), the order of
workers alone or in lockstep (`schedule`, `lockstep`), starting and watching each worker
(`launch`, `heartbeat`, `workerenv`), how a worker ended (`outcome`), and `ab
--until-resolved`'s looks (`resolve`).

May import: the vocabulary, `kscperf.plan`, `kscperf.stats` and `kscperf.results`. Never
imports torch or `kscperf.worker`: workers are processes (`python -m kscperf.worker`).
"""
