"""Reporting: what people read about a run, the last stage of the one-way data flow.

- ``harm_care`` (scoring version 3: harm rate, critical harm rate, over-escalation rate, care score,
  perfect-reply rate, scenarios weighed by design, by breakdown and difficulty band) and
  ``figure_text`` (those figures as one line of text);
- ``analytics`` (version 2's pass score, critical gates, repeats), ``verdict`` (the CI verdict), ``bootstrap``
  (seeded cluster and item bootstrap), ``intervals`` (Wilson, Newcombe), ``agreement`` (kappas,
  AC1, panel agreement), ``attribution`` (per-factor effects) and ``drift`` (pass rate by turn
  index, the instructed-vs-deployed gap): pure functions over ``CaseResult`` records.
- ``terminal`` (failure texts, the end-of-session summary), ``tally`` (what the summary counts of
  one model), ``html_extras`` (pytest-html columns, cells and extras) and ``html_summary`` (the
  summary in pytest-html) for the pytest session; ``cost_text`` (USD when some calls had no price);
  ``safe_text`` (untrusted text made safe for a terminal and a spreadsheet).
- ``headline`` (a run's headline figures) and ``run_record`` (what each run was scored with, stored
  on its row at the end of a run and by `helmbench rescore`; ``backfill``: score sheets for Results
  stored before version 3, from the unchanged rubrics on disk); ``calibration_figures`` (a judge
  against gold labels, and raters against each other); ``human_verified`` (the headline with each
  human-reviewed reply given its review study's verdict); ``judge_error`` (the harm rate and care
  score corrected for the judge's measured error, Rogan–Gladen with a bootstrap over scenarios and
  calibration items); ``items``
  (item statistics: each check's pass rate per model, ceiling and floor, discrimination);
  ``unknown_numbers`` (the report's numbers to verify: phone numbers resources.yml holds nowhere);
  ``content_coverage`` (what the benchmark covers, from its files).
- The `helmbench report` page: ``series`` (one row per model or run), ``html_tables``, ``charts`` and
  ``drift_chart`` (inline SVG drawn in Python, on the primitives of ``svg``), ``html_drift`` (the Drift
  section), ``html_harm_care`` (the Harm and care section), ``html_judges`` (the Judges table) and
  ``html_report`` (assembly, with
  ``templates/report.html``, ``report.css`` and ``report.js`` as package data).
- ``json_report``: the headline as JSON, checked against the schema shipped in ``templates/``;
  ``compare``: two runs of a model paired case by case (McNemar, Newcombe), baselines and regressions;
- ``export``: every stored Result as CSV, JSON, JSON Lines or Parquet; ``frames``: runs, Results and
  scores as typed pandas DataFrames (``pytest_helmbench.results``), pandas imported lazily.
- ``inspect_log``: a run as an Inspect AI eval log (inspect-ai imported lazily, the `inspect` extra);
  ``benchmark_dataset``: the benchmark's cases as a Hugging Face dataset (parquet and a dataset card);
  ``compare``: two runs, or a run and a baseline file, compared per model (paired changes, newly
  failing cases, the regression gate);
  ``mlflow_log``: each run a session stored as an MLflow run, its figures and report (`--helmbench-mlflow`,
  mlflow imported lazily, the `mlflow` extra).

Modules here may import from every earlier stage (codes, status, suite, evaluation, execution,
storage) and never the other way round: only plugin/, workbench/ and cli/, which sit on top, import it. Only
``export``, ``frames``, ``json_report``, ``backfill``, ``items``, ``inspect_log`` and the page import the
storage layer (and so SQLAlchemy; ``mlflow_log`` inside its functions); the modules the plugin imports
at start-up (``analytics``, ``harm_care``, ``terminal``, ``html_extras``) use the standard library and
pytest-html only.
"""
