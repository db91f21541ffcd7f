"""What no run may start with, refused before the first call (nothing is sent, exit 4).

- A cost ceiling that could not count some model's calls: a self-hosted OpenAI-compatible server
  reports no cost, and without a price the ceiling would be silently off.
- A models.yml judge that the command line's self-hosted base URL would answer instead of the
  endpoint its id names: the verdicts would be recorded under a judge that never gave them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..codes import DEPLOYED
from ..errors import HelmbenchError
from ..suite.cases import Case
from ..suite.model import Scenario
from ..trust import OptionSource
from .state import HelmbenchState


def refuse_misrouted_helpers(state: HelmbenchState, cases: Sequence[Case] | None) -> None:
    """A models.yml judge (or the user agent it defaults to) that the command line's self-hosted base
    URL would answer instead of the endpoint its id names: refused before the first call when a case
    needs it (`cases` None: under xdist, any scenario of the benchmark), since its verdicts would be
    recorded under a judge that never gave them."""
    misrouted = misrouted_helpers(state)
    if misrouted and needs_helpers(state, cases):
        raise HelmbenchError(
            f"the marking model {', '.join(misrouted)} is from models.yml and would be sent to "
            f"{state.settings.base_url}, the self-hosted server given with --helmbench-base-url, which "
            "answers as whatever model it serves: its verdicts would be recorded under a judge that never "
            "gave them. Give that judge its own base_url in models.yml, or name the judge with "
            "--helmbench-marking-model; nothing was sent"
        )


def needs_helpers(state: HelmbenchState, cases: Sequence[Case] | None) -> bool:
    """Some case needs a judge, an extraction or a simulated user (`cases` None: some scenario)."""
    if cases is None:
        if DEPLOYED in state.settings.layouts:
            return True
        scenarios = []
        for folder in state.loader.scenario_dirs():
            try:
                scenarios.append(state.scenario(folder))
            except HelmbenchError:
                continue  # said as its collection error
        return any(_scenario_needs_helpers(state, scenario) for scenario in scenarios)
    return any(case.layout == DEPLOYED or _scenario_needs_helpers(state, case.scenario) for case in cases)


def _scenario_needs_helpers(state: HelmbenchState, scenario: Scenario) -> bool:
    simulated = any(
        p.dialogue is not None and p.dialogue.simulation is not None for p in scenario.perturbations
    )
    return simulated or state.evaluators.needs_judge(scenario)


def misrouted_helpers(state: HelmbenchState) -> list[str]:
    """The models.yml judges (and the user agent they default to) that the command line's or the
    environment's self-hosted base URL would answer instead of the endpoint their id names."""
    settings = state.settings
    if settings.base_url_source not in (OptionSource.CLI, OptionSource.ENV) or state.option("marking-model"):
        return []
    helpers = list(settings.marking_models)
    if settings.user_model is None and settings.user_agent is not None:
        helpers.append(settings.user_agent)
    unique = {helper.id: helper for helper in helpers}.values()
    return [
        helper.id
        for helper in unique
        if helper.base_url is None
        and settings.self_hosted(helper)
        and state.providers.for_model(helper.id).name == "http"
        and helper.id not in settings.model_ids  # a model under test on that server may judge too
    ]


def refuse_an_unkeepable_ceiling(state: HelmbenchState, models: set[str]) -> None:
    """--helmbench-max-cost with a model whose answers report no cost and that has no price (a
    self-hosted OpenAI-compatible server): the ceiling could not count its calls, so nothing is sent.
    (A call that turns out unpriced later stops its model: execution/executor.py.)"""
    settings = state.settings
    if settings.max_cost is None:
        return
    unpriced = []
    for model in dict.fromkeys([*sorted(models), *settings.helper_ids]):
        if state.is_dry_run(model) or not settings.self_hosted(settings.model(model)):
            continue
        try:
            priced = state.clients.pricing(model) is not None
        except HelmbenchError:
            priced = False
        if not priced:
            unpriced.append(model)
    if unpriced:
        raise HelmbenchError(
            f"--helmbench-max-cost ${settings.max_cost}: {', '.join(unpriced)} report no cost and have no "
            "price, so the ceiling could not count their calls; nothing was sent. Run them without "
            "--helmbench-max-cost (a self-hosted server's calls cost nothing per token)"
        )
