"""The GPU proof kit behind `tools/gpu-check`: its sections, time caps and exit statuses,
judging each check against its target (`gpucheck`), and its terminal lines, markdown and
JSON (`gpureport`). The device-side probes are the worker's (`kscperf.worker.gpuprobe`).

May import: the vocabulary, `kscperf.plan`, `kscperf.results` and `kscperf.orchestrator`.
Never imports torch.
"""
