"""Execution: run each selected case and turn what happened into an Outcome (model call -> outcome).

- executor.py: one case end to end — request, response cache, cost ceiling, call, judge, evaluation;
  it sees the cache only through its `AnswerCache` protocol.
- turns.py: a conversation in progress (`Talk`) and its verdict from every judged reply;
  simulated_user.py: the user agent's next turn; judging.py: the panel of judges, the deployed
  layout's extraction and every helper call (cached without the nonce).
- prefetch.py: submits every selected case's call to a bounded pool ahead of pytest's loop.
- outcome.py: `Outcome` (what one case ended as, plain data that crosses xdist), `CaseResult` (the
  scoring view of it, one builder) and the exceptions that carry an outcome to pytest.
- budget.py: the cost ledger and the stop board shared by every process of a session.
- shared.py: `SharedFiles`, the one typed place for the files xdist processes share.
- resume.py: the resume plan (what to run again) from what earlier runs stored; estimate.py: the
  pre-run token and cost estimate; changed.py: --helmbench-changed's decision against a baseline.
- selection.py: what a session selected against what the benchmark holds (is a run a subset?);
  unpriced.py: calls nobody priced, counted so a sum of USD can say it is incomplete.
- calibrate.py: the calibration set put to a judge exactly as in a run.

May import suite/, providers/, evaluation/, config, status, codes and errors; never storage/ or
reporting/ (the state hands the executor its cache and the stored runs as plain data).
"""
