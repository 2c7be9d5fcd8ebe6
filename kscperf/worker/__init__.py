"""The worker side: everything that imports torch.

One cell from spec file to result file (`cell`), the fork server (`server`), the tasks
(`tasks`), the tools and plug-in interface (`tools`), the float64 check (`check`), the clock
and memory probes (`measure`), the machine-speed canary (`canary`), torch's facts
(`torchinfo`), the turns of `ab` (`turns`), what an exception becomes (`failures`), the
compile panel's reading of torch (`compilepanel`), the compiler caches (`caches`), and the
GPU kit's timers and probes (`timers`, `gpuprobe`). Run as `python -m kscperf.worker`.
Nothing outside this package imports torch; importing the package itself imports nothing.

May import: the vocabulary (`kscperf.errors`, `names`, `spec`, `paths`, `compilepanel`),
`kscperf.plan` (to import a definition module and find plug-ins) and `kscperf.results` (the
machine facts it records, the atomic write of its result file). No other stage imports it.
"""
