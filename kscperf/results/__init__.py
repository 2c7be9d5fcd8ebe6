"""Results files: the only reader and writer of a build's results file (`files`), its pyperf
half (`pyperfjson`), merging shards (`merge`), the one typed record of what a build measured
(`samples`), the metadata keys and their policy tables (`metadata`), the machine, library and
git facts recorded in them (`envinfo`), and atomic writes (`fileio`).

May import: the vocabulary, `kscperf.plan` and `kscperf.stats`. Decides no verdict and
renders nothing.
"""
