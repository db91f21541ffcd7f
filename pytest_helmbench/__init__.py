"""HELMBench: mental-health safety evaluation of LLMs as a pytest plugin.

Data flows one way: files -> parsed benchmark -> cases -> prompt -> model call -> evaluation ->
outcome -> storage -> analytics -> reports. Each stage is a subpackage; a module imports its own
stage or an earlier one, never a later one (tests/test_architecture.py keeps it so).

- suite/: the benchmark files read, confined, into scenarios, cases and composed prompts
- providers/: how a model id is answered (HTTP, OpenAI-compatible, embedded llama.cpp, oracles)
- evaluation/: rule on an answer (one file per evaluation type, the judge's request and parsing)
- execution/: one case end to end, and the outcome it ends as
- storage/: the results database (SQLite or PostgreSQL) written by one recorder
- reporting/: scores, intervals, the terminal summary, the HTML report, exports
- workbench/: `helmbench serve`, the review web app (browse runs, blind clinician ratings, agreement)
- plugin/: the pytest glue, the only place with `pytest_*` hooks (the `pytest11` entry point)
- cli/: the `helmbench` command

The vocabulary every stage shares: codes.py (benchmark codes and their order), errors.py
(user-facing errors), status.py (what a case and a run ended as), jsontext.py (outside JSON read
safely), redaction.py (credentials hidden in any text), trust.py (where keys and prompts may go).
Settings: config.py (the run's resolved settings), models_file.py (models.yml), benchmark_root.py
(which benchmark a session runs). Public API: results.py (stored results as pandas DataFrames).
"""

__version__ = "1.0.0"
