"""Everything for people and for programs that read kscperf's output: numbers, tables and
comparisons as text, markdown and JSON (`formatting`, `textunits`, `historytext`,
`compileview`, `bisecttext`), the shell commands that confirm a change (`confirm`), the report
(`report`, `plots`), the dashboard (`dashboard`, `dashboard_views`, `dashboard_timeline`,
`sparklines`) and their one style and Jinja environment (`style`).

May import: the vocabulary, `kscperf.stats`, `kscperf.results`, `kscperf.compare`,
`kscperf.history`, `kscperf.orchestrator` and `kscperf.bisect` (the data it lays out). Computes no statistic
and decides no threshold; only the CLI prints.
"""
