"""The validation scripts' logic (`tools/dashboard-bench`, `tools/truth-check`,
`tools/harness-bench`, which are thin entry points into it): how well kscperf finds changes
and how fast (dashboard-bench), whether its numbers and verdicts can be trusted
(truth-check), and how much time it spends around its measurements (harness-bench).

It lives beside `kscperf`, not inside it: it imports torch, drives kscperf's workers and
command line, and reads the tests' synthetic generators (`tests/synthetic.py`)."""
