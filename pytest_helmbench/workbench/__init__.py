"""The review workbench: `helmbench serve`'s web application on a results database (after reporting in
the data flow: it reads runs and their scores, and writes only its own review tables).

- replies.py: a stored Result read as a person sees it (judged replies, the conversation, checks);
- sampling.py: which judged replies a study draws (strata, over-sampled groups, the rubric as judged);
- store.py: studies, raters and their hashed tokens, ratings and adjudications by revision;
- figures.py: final verdicts, rater-rater and judge-human agreement, the `human:<study>` calibration,
  the human-verified headline; exports.py: ratings as CSV and JSON Lines, calibration items;
- browse.py: runs side by side and cases filtered, searched and paged in SQL;
- security.py: tokens, CSRF, the Content-Security-Policy and other headers; app.py: the Starlette
  application and its routes; server.py: uvicorn on a bound socket, the owner's link printed;
- templates/: the Jinja2 pages (autoescaped), workbench.css and workbench.js (package data).

May import every earlier stage (suite, execution, storage, reporting, ...); only cli/ imports it.
Starlette, Jinja2 and uvicorn (the `workbench` extra) are imported here only, never by the plugin.
"""
