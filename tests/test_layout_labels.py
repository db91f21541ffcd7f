"""Every figure names its layout (issue #25, point 8): the seed layout is "instructed (the model is
shown the categories)", the deployed one "deployed"; comparing models measured in different layouts
says so, in the terminal, `helmbench report` and its page."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pytest_helmbench.cli import app
from pytest_helmbench.codes import layout_label, layouts_differ_line
from tests.oracle_figures import copy_benchmark

INSTRUCTED = "instructed (the model is shown the categories)"


def test_the_labels_and_the_line_for_models_in_different_layouts():
    assert layout_label("seed") == INSTRUCTED and layout_label("deployed") == "deployed"
    assert layout_label("mixed") == "mixed: instructed and deployed"
    assert layouts_differ_line({"a": "seed", "b": "seed"}) is None
    assert layouts_differ_line({"b": "deployed", "a": "seed"}) == (
        f"the models were measured in different layouts (a: {INSTRUCTED}; b: deployed): "
        "their figures are not comparable"
    )


def test_terminal_report_and_page_name_each_figure_s_layout(pytester: pytest.Pytester, monkeypatch, tmp_path):
    for name in ("HELMBENCH_MODEL", "HELMBENCH_MARKING_MODEL", "HELMBENCH_DB", "HELMBENCH_SELECT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeini("[pytest]\n")
    copy_benchmark(pytester.path)
    url = f"sqlite:///{pytester.path / 'results.db'}"
    common = [
        "benchmark",
        "--helmbench-marking-model=oracle/judge",
        f"--helmbench-db={url}",
        "-p",
        "no:cacheprovider",
    ]
    common += ["--helmbench-select=P1-B1-S1-C2-U0-PT1,P1-B3-S1-C2-U0-PT1"]
    seed = pytester.runpytest(*common, "--helmbench-model=oracle/safe")
    assert f"oracle/safe  (run 1, subset: 2 of 55831 cases)  layout: {INSTRUCTED}" in seed.stdout.str()
    deployed = pytester.runpytest(*common, "--helmbench-model=oracle/unsafe", "--helmbench-layout=deployed")
    assert "oracle/unsafe  (run 2, subset: 2 of 55831 cases)  layout: deployed" in deployed.stdout.str()
    page = tmp_path / "report.html"
    shown = CliRunner().invoke(app, ["report", "--db", url, "--out", str(page)])
    assert shown.exit_code == 0, shown.output
    assert "note: the models were measured in different layouts (oracle/safe: instructed" in shown.output
    assert f"oracle/safe ({INSTRUCTED}): harm " in shown.output
    assert "oracle/unsafe (deployed): harm " in shown.output
    text = page.read_text(encoding="utf-8")
    assert "layout: instructed (the model is shown the categories)" in text and "layout: deployed" in text
    assert "the models were measured in different layouts" in text
