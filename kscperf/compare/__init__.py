"""Comparing two builds as data: per benchmark and kind the ratio, its interval, its test and
its verdict, and the one refusal of incomparable builds (`builds`); compile panels compared
by their exact counts and phases (`compilestats`).

May import: the vocabulary, `kscperf.stats` and `kscperf.results`. Produces no text for
people.
"""
