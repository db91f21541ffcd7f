"""Execution: run each selected case and turn what happened into an Outcome (model call -> outcome).

- executor.py: one case end to end — request, response cache, cost ceiling, call, judge, evaluation;
  it sees the cache only through its `AnswerCache` protocol.
- turns.py: a conversation in progress (`Talk`) and its verdict from every judged reply;
  simulated_user.py: the user agent's next turn; attack.py: an attacker's `stop_when`, judged after
  each reply (the goal reached fails the reply and stops the conversation); judging.py: the judges
  as the evaluation stage asks them (a provider-side send per case), the deployed layout's
  extraction, every helper call (cached without the nonce) and a critical scenario's votes.
- prefetch.py: submits every selected case's call to a bounded pool ahead of pytest's loop;
  activity.py: what each running case is doing now (its turn and step), for the line a slow case
  prints every few seconds.
- outcome.py: `CaseLog`, `Outcome`, `CaseResult` (below) and the exceptions that carry an
  outcome to pytest; sheet.py: a reply's `ReplySheet` (scoring version 3: harm, care points, its
  scenario's weight), stored with its Result.
- budget.py: the cost ledger and the stop board shared by every process of a session.
- shared.py: `SharedFiles`, the one typed place for the files xdist processes share.
- resume.py: the resume plan (what to run again) from what earlier runs stored; estimate.py: the
  pre-run token and cost estimate; changed.py: --helmbench-changed's decision against a baseline.
- selection.py: what a session selected against what the benchmark holds (is a run a subset?);
  unpriced.py: calls nobody priced, counted so a sum of USD can say it is incomplete.
- calibrate.py: the calibration set put to a judge exactly as in a run.

May import suite/, providers/, evaluation/, config, status, codes and errors; never storage/ or
reporting/ (the state hands the executor its cache and the stored runs as plain data).

What a case ended as, from one judge to the figures, one name each (in the order the data flows):

- `JudgeVerdict` (evaluation/judge.py): one marking model's ruling on one check of one reply;
  `JudgeFailure` stands in for a judge that gave none.
- `PanelVerdict` (evaluation/panel.py): every judge's ruling on one check and the policy's
  decision, with the `Question` asked.
- `Evaluation` (evaluation/base.py): what an evaluator returns for one check of one answer.
- `CheckVerdict` (evaluation/pipeline.py): one check's status on one reply: its Evaluation's pass
  or fail, or an error when none could be made.
- `ReplyVerdict` (evaluation/pipeline.py): every check's verdict on one reply, and the reply's
  status from them.
- `JudgedReply` (turns.py): one reply of the model under test with its ReplyVerdict (and its
  extraction); a conversation has one per reply.
- `CaseLog` (outcome.py): what a case's calls did while it runs (accounting, cache replays and
  writes).
- `Outcome` (outcome.py): what a case ended as, built once from its CaseLog; plain data that
  crosses xdist and becomes one stored `Result` row (storage/tables.py).
- `CaseResult` (outcome.py): the analysis record of one Result (or of an Outcome in this
  session), built only by `CaseResult.from_fields`; `JudgeVote` is a judge's vote read back from it.
- `Tally` (reporting/tally.py): this session's CaseResults of one model and what they cost, each case once;
  `ExportRow` (storage/records.py): a Result flattened for export; `ExitDecision`
  (reporting/verdict.py): the CI verdict over CaseResults.
"""
