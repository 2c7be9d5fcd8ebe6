"""Definitions and the plan: finding models and the tools they define in user modules by the
naming convention (statically, with `ast`, in the orchestrator; by import in a worker), finding
third-party compiler plug-ins by name, and turning models x tools x tasks into cells, filters,
expected costs, shards and rounds.

Owns: `definitions`, `plugins`, `cells`. May import: the vocabulary (`kscperf.errors`,
`names`, `spec`, `paths`, `compilepanel`) only. Times nothing, spawns nothing.
"""
