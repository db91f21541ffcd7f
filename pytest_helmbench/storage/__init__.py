"""Storage: the results database (outcome -> storage in the data flow).

- tables.py: the SQLModel tables, evolved only by the Alembic migrations in migrations/.
- engine.py: engines for a URL, the schema's state and revision, creating or migrating it under a
  lock (`upgrade`), opening an existing database only (`open_existing`), `stamp`, `StorageError`.
- content.py: the content rows a case ran with, upserted atomically by code and content hash.
- recorder.py: the `Recorder`, the one writer of runs and Results (and of response-cache entries).
- cache.py: the response cache's reads; queries.py: stored runs read back for analytics and reports;
  records.py: every Result as a flat record, streamed (the export rows); columns.py: the column
  sets (names, pandas dtypes) export and pytest_helmbench.results share; calibration_store.py: judge
  calibrations, saved by `helmbench calibrate` and found again for a run's judge and rubrics.

May import the earlier stages (suite/, providers/, execution/), status, codes, errors; never reporting/,
plugin or cli. SQLAlchemy, SQLModel and Alembic are imported here only: nothing plugin.py imports at
module level may import this package (a plain pytest session must not load them).
"""
