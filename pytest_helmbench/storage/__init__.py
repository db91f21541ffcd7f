"""Storage: the results database (outcome -> storage in the data flow).

- tables.py: the SQLModel tables, evolved only by the Alembic migrations in migrations/.
- engine.py: engines for a URL, the schema's state and revision, creating or migrating it under a
  lock (`upgrade`), opening an existing database only (`open_existing`), `stamp`, `StorageError`.
- content.py: the content rows a case ran with, upserted atomically by code and content hash.
- recorder.py: the `Recorder`, the one writer of runs and Results (and of response-cache entries);
  result_rows.py: what a Result row and its counter increments are, and PostgreSQL's one statement
  for a group of them; early.py: the Results stored before their items report them.
- cache.py: the response cache's reads; queries.py: stored runs read back for analytics and reports;
  records.py: every Result as a flat record, streamed (the export rows); transcripts.py: every Result
  of a run with its messages, reply and verdicts, streamed (the Inspect log's samples); columns.py:
  the column sets (names, pandas dtypes) export and pytest_helmbench.results share;
  calibration_store.py: judge calibrations, saved by `helmbench calibrate` and found again for a
  run's judge and rubrics; review_verdicts.py: the final verdicts review studies reached on a run's
  replies (one rule for the workbench and the report's human-verified figures).
- coverage.py: which Results make a model's headline, and what a run selected; labels.py: the
  report's human names for stored codes; prior_runs.py: earlier runs read for a resume, a retry of
  errors and --helmbench-changed; run_scores.py: what a run was scored with.
- fleet.py: one run across processes (run key, shards, shared spend and stops), each agreement one
  atomic statement; pgtext.py: U+0000 kept out of PostgreSQL's text and jsonb.

May import the earlier stages (suite/, providers/, execution/), status, codes, errors; never reporting/,
plugin or cli. SQLAlchemy, SQLModel and Alembic are imported here only: nothing plugin/ imports at
module level may import this package (a plain pytest session must not load them).
"""
