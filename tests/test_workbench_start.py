"""What `helmbench serve` imports before its owner's link (issue #27: the start under 2 s): the command
table, the database layer and the web application, and not the benchmark's loader, the study sampler
or the models.yml parser, which only other commands use."""

from __future__ import annotations

import subprocess
import sys

NOT_AT_START = (
    "pytest",
    "pytest_helmbench.suite.loader",
    "pytest_helmbench.suite.files",
    "pytest_helmbench.workbench.sampling",
    "pytest_helmbench.workbench.figures",
    "pytest_helmbench.workbench.exports",
    "alembic",
)


def test_serve_starts_without_the_loader_the_sampler_or_the_figures():
    code = (
        "import sys, pytest_helmbench.cli, pytest_helmbench.cli.review\n"
        "from pytest_helmbench.workbench import app, server\n"
        f"print(sorted(m for m in {NOT_AT_START!r} if m in sys.modules))\n"
        "print('pytest_helmbench.storage.queries' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"]  # the first page's queries are there
