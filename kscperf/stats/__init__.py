"""Pure statistics on numbers: medians, intervals and tests (`core`), the sequential design
of `ab --until-resolved` (`sequential`), the machine-speed canary's statistics (`machine`),
a history series' levels and noise (`serieslevels`), change points with the false discovery
rate controlled (`changepoints`), and the verdict vocabulary (`verdicts`).

May import: the vocabulary only. No I/O, no text for people, no torch.
"""
