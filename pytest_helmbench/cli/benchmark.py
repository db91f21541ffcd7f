"""The benchmark commands: list, show, run-single, run-batch, run-all, estimate, coverage.

Each reads the benchmark the way the plugin does (the same loader, evaluator registry and defaults)
or hands over to pytest with the right arguments.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..codes import LAYOUTS
from ..errors import HelmbenchError
from .defaults import ConfigFileError, find_project
from .results import fail

if TYPE_CHECKING:  # the loader and its parsers are imported by the commands that read a benchmark: every
    # `helmbench` command (`serve` too) would otherwise pay for them at start (issue #27)
    from ..suite.attack import Attack
    from ..suite.cases import Case
    from ..suite.model import Scenario

commands = typer.Typer()  # added to the `helmbench` app by register()

RootOption = typer.Option(
    None,
    "--root",
    help="benchmark root folder (default: the plugin's, ini helmbench_root or benchmark/ in the rootdir)",
)


def benchmark_root(root: Path | None) -> Path:
    """--root, else where `pytest` would look from here: ini helmbench_root (default benchmark),
    relative to the rootdir pytest finds (cli/defaults.py)."""
    if root is not None:
        return root
    try:
        return find_project().root
    except ConfigFileError as exc:
        fail(str(exc))
        raise AssertionError from None


PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def load_all(root: Path) -> tuple[list[Scenario], list[str]]:
    """Every scenario that loads, plus one message per scenario that does not."""
    from ..evaluation.builtin import builtin_registry
    from ..suite.loader import BenchmarkLoader

    if not (root / "scenarios").is_dir():
        fail(f"{root}: no scenarios/ folder here (use --root)")
    loader = BenchmarkLoader(root, evaluation_types=builtin_registry())
    scenarios, problems = [], []
    for folder in loader.scenario_dirs():
        try:
            scenarios.append(loader.load_scenario(folder))
        except HelmbenchError as exc:
            problems.append(str(exc))
    return scenarios, problems


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def count_line(cases: int, matched: int, loaded: int, prefix: str | None) -> str:
    """`list`'s summary: the scenarios that hold the listed cases, out of those loaded when filtered."""
    if not prefix:
        return f"{plural(cases, 'case')} in {plural(loaded, 'scenario')}"
    return f"{plural(cases, 'case')} in {matched} of {plural(loaded, 'scenario')} (matching {prefix})"


@commands.command("list")
def list_cases(
    prefix: str | None = typer.Argument(
        None, help="segment-aware code filter, e.g. P1-B1 or P1-B1-S1-C2 (never S10 for S1)"
    ),
    root: Path | None = RootOption,
    scenarios_only: bool = typer.Option(
        False, "--scenarios", help="one line per scenario with its case count"
    ),
) -> None:
    """List the cases (one code per line), optionally filtered by code prefix."""
    from ..suite.cases import expand, parse_selectors

    scenarios, problems = load_all(benchmark_root(root))
    try:
        selectors = parse_selectors([prefix]) if prefix else []
    except ValueError as exc:
        fail(str(exc))
    total = matched = 0
    for scenario in scenarios:
        cases = [
            c
            for c in expand(scenario, [""])
            if not selectors or any(s.matches(c.segments) for s in selectors)
        ]
        total += len(cases)
        matched += bool(cases)
        if scenarios_only and cases:
            typer.echo(f"{scenario.code}\t{len(cases)} cases\t{scenario.evaluation.type}\t{scenario.title}")
        elif not scenarios_only:
            for case in cases:
                typer.echo(case.code)
    typer.echo(
        count_line(total, matched, len(scenarios), prefix)
        + (f"; {len(problems)} scenario(s) failed to load" if problems else ""),
        err=True,
    )
    for problem in problems:
        typer.echo(f"error: {problem}", err=True)
    if problems:
        raise typer.Exit(1)


def find_case(root: Path, code: str) -> Case:
    """Locate one case by its full code (P1-B1-S1-C1[-U1]-PT1)."""
    from ..evaluation.builtin import builtin_registry
    from ..suite.cases import case_by_code
    from ..suite.loader import BenchmarkLoader

    parts = code.strip().split("-")
    if len(parts) not in (5, 6):
        fail(f"{code!r} is not a full case code like P1-B1-S1-C1-PT1 or P1-B1-S1-C1-U1-PT1")
    loader = BenchmarkLoader(root, evaluation_types=builtin_registry())
    folder = root / "scenarios" / "-".join(parts[:3])
    if not folder.is_dir():
        fail(f"no scenario folder {folder}")
    try:
        scenario = loader.load_scenario(folder)
    except HelmbenchError as exc:
        fail(str(exc))
    case = case_by_code(scenario, code)
    if case is not None:
        return case
    fail(f"{code} is not a case of {scenario.code} (see: helmbench list {scenario.code})")
    raise AssertionError


@commands.command()
def show(
    code: str = typer.Argument(..., help="full case code, e.g. P1-B1-S1-C1-PT1"),
    layout: str = typer.Option(
        "seed", "--layout", help="seed (the instructed JSON prompt) or deployed (system prompt, plain reply)"
    ),
    root: Path | None = RootOption,
) -> None:
    """Print the exact messages and response_format of one case, in one layout."""
    from ..suite.prompt import compose

    if layout not in LAYOUTS:
        fail(f"--layout {layout!r} must be one of {', '.join(LAYOUTS)}")
    case = replace(find_case(benchmark_root(root), code), layout=layout)
    prompt = compose(case)
    if not prompt.turns:
        typer.echo(f"=== prompt ({len(prompt.text)} characters, sha256 {prompt.hash[:12]}) ===")
        typer.echo(prompt.text)
    else:
        messages = prompt.messages
        typer.echo(f"=== {len(messages)} messages ({layout} layout, sha256 {prompt.hash[:12]}) ===")
        for number, message in enumerate(messages, 1):
            typer.echo(f"--- {number}. {message['role']} ({len(message['content'])} characters) ---")
            typer.echo(message["content"])
    if prompt.simulation is not None:
        typer.echo(
            f"=== then a simulated user (--helmbench-user-model) writes each next user message, "
            f"up to {prompt.simulation.turns} replies of the model; its persona (never sent to the model) ==="
        )
        typer.echo(prompt.simulation.persona)
        _show_attack(prompt.simulation.attack)
    typer.echo("=== response_format ===")
    if prompt.response_format is None:
        typer.echo("none: the reply is plain text (the marking model extracts the scenario's fields from it)")
    else:
        typer.echo(json.dumps(prompt.response_format, indent=2, ensure_ascii=False))


def run_pytest(args: list[str], extra: list[str]) -> None:
    """Invoke pytest in-process with the plugin's options; exit with pytest's status."""
    typer.echo("pytest " + " ".join(args + extra), err=True)
    import pytest  # only the commands that run pytest pay for importing it

    raise typer.Exit(int(pytest.main(args + extra)))


def model_args(models: str | None) -> list[str]:
    return [f"--helmbench-model={models}"] if models else []


@commands.command("run-single", context_settings=PASS_THROUGH)
def run_single(
    ctx: typer.Context,
    case: str | None = typer.Option(
        None, "--case", help="full case code (default: the benchmark's first case)"
    ),
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path | None = RootOption,
) -> None:
    """Run one case against each model (a quick demonstration); extra arguments go to pytest."""
    from ..suite.cases import expand

    root = benchmark_root(root)
    if case is None:
        scenarios, _ = load_all(root)
        if not scenarios:
            fail("no scenario loads; run `helmbench list` to see why")
        case = expand(scenarios[0], [""])[0].code
    found = find_case(root, case)
    run_pytest(
        [
            str(found.scenario.path),
            f"--helmbench-select={found.code}" + ("" if found.user_context else "-U0"),
            *model_args(models),
        ],
        ctx.args,
    )


@commands.command("run-batch", context_settings=PASS_THROUGH)
def run_batch(
    ctx: typer.Context,
    scenario: str | None = typer.Option(
        None, "--scenario", help="scenario code(s), comma-separated, e.g. P1-B1-S1"
    ),
    all_scenarios: bool = typer.Option(False, "--all-scenarios", help="run every scenario"),
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path | None = RootOption,
) -> None:
    """Run every case of some scenarios (or all); extra arguments go to pytest (e.g. -n 4)."""
    if bool(scenario) == all_scenarios:
        fail("give exactly one of --scenario CODE or --all-scenarios")
    selection = [f"--helmbench-select={scenario}"] if scenario else []
    run_pytest([str(benchmark_root(root)), *selection, *model_args(models)], ctx.args)


@commands.command("run-all", context_settings=PASS_THROUGH)
def run_all(
    ctx: typer.Context,
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path | None = RootOption,
) -> None:
    """List the scenarios, then run the whole benchmark; extra arguments go to pytest."""
    root = benchmark_root(root)
    scenarios, problems = load_all(root)
    typer.echo(
        f"{len(scenarios)} scenarios load"
        + (f", {len(problems)} do not (pytest will report them)" if problems else "")
    )
    run_pytest([str(root), *model_args(models)], ctx.args)


@commands.command(context_settings=PASS_THROUGH)
def estimate(
    ctx: typer.Context,
    models: str | None = typer.Option(
        None, "--models", help="comma-separated model ids (default: models.yml)"
    ),
    root: Path | None = RootOption,
) -> None:
    """Print expected tokens and USD for the selected cases; nothing is sent.

    pytest selection arguments pass through."""
    run_pytest([str(benchmark_root(root)), "--helmbench-estimate", "-q", *model_args(models)], ctx.args)


@commands.command("coverage")
def coverage_command(root: Path | None = RootOption) -> None:
    """Print what the benchmark covers, counted from its files: per pillar and behaviour, scenarios by
    risk level, perturbations by style, cases with a locale and cases (a markdown table, then the cases
    of each locale; the docs' coverage table is this output)."""
    from ..evaluation.builtin import builtin_registry
    from ..reporting.content_coverage import coverage, markdown
    from ..suite.loader import BenchmarkLoader

    folder = benchmark_root(root)
    scenarios, problems = load_all(folder)
    info = BenchmarkLoader(folder, evaluation_types=builtin_registry()).info()
    typer.echo(f"HELMBench {info.version}: {plural(len(scenarios), 'scenario')}\n")
    typer.echo(markdown(coverage(scenarios, info)), nl=False)
    for problem in problems:
        typer.echo(f"error: {problem}", err=True)
    if problems:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.registered_commands.extend(commands.registered_commands)


def _show_attack(attack: Attack | None) -> None:
    """An attacker's goal and strategy (to the user agent) and its stop check (to the judge)."""
    if attack is None:
        return
    if attack.goal:
        typer.echo(f"=== the attacker's goal (to the simulated user only) ===\n{attack.goal}")
    if attack.strategy:
        typer.echo(f"=== strategy: {attack.strategy} (its instruction block, to the simulated user) ===")
    if attack.stop_when is not None:
        stop = attack.stop_when
        typer.echo(
            f"=== stop_when (judged after each reply; any answer but {stop.pass_answer!r} stops the "
            f"conversation and fails the case) ===\n{stop.question}"
        )
