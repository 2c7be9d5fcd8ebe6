"""The worker side: everything that imports torch.

One cell from spec file to result file (`cell`), the fork server (`server`), the tasks
(`tasks`), the tools and plug-in interface (`tools`), the float64 check (`check`), the clock
and memory probes (`measure`), the machine-speed canary (`canary`) and torch's facts
(`torchinfo`). Run as `python -m kscperf.worker`. Nothing outside this package imports torch;
importing the package itself imports nothing.
"""
