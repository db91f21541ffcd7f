"""HELMBench's pytest plugin: the only place with `def pytest_*` hooks, one module per phase or role.

Loaded through the `pytest11` entry point (`helmbench = pytest_helmbench.plugin`) in every pytest
session, so every hook is inert unless HELMBench cases were collected or an option asks for work.
This module adds the options and HELMBench's own hookspecs and registers the others; each delegates
the work to the layers below (suite, providers, evaluation, execution, storage, reporting).

In the order pytest calls them:

- `options` — every `--helmbench-*` option, its ini twin and environment variable (registration
  and the one precedence rule); `hookspecs` — the hooks evaluators and providers are registered by;
- `state` — what the phases share (settings, services built lazily, tallies, notes);
- `collect` — which benchmark is collected, one File per scenario (`items`: the File and Item nodes;
  `collection_sample`: --helmbench-sample drawn before the items are built, when it can be);
- `select` — every narrowing of the collected cases, in run order (one modifyitems wrapper);
- `run` — prepare the run (`preflight`: what no run may start with), prefetch calls, make each
  case's report;
- `controller` — the process that writes: resume plans, recording, finishing, summary, exit status;
- `xdist` — only with pytest-xdist: the workers' data and a crashed worker's case;
- `outputs` — JUnit XML metadata and pytest-html's columns and summary;
- helpers: `notices` (what is said before the first case), `compat` (rerunfailures, timeout,
  randomly, `--dist each`), `gc_tuning` (frozen collections).

May import every stage below (suite … reporting) and the shared vocabulary; only cli/ imports it (the
option table). Heavy libraries (SQLAlchemy, httpx) are imported by the hook that first needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pluggy import HookimplMarker

from .options import add_options

if TYPE_CHECKING:
    import pytest

    from ..evaluation.registry import EvaluatorRegistry
    from ..providers.registry import ProviderRegistry
    from .state import HelmbenchState

# Loaded in every session: SQLAlchemy, Alembic and httpx are imported by the hook that first needs them.

MARKER = (
    "helmbench(code, pillar, behaviour, scenario, condition, user_context, perturbation, style, model, "
    "critical, risk, repeat): a HELMBench case"
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # The phases are imported here, not at module level: `helmbench` reads the option table
    # (plugin.options), and importing the whole plugin would cost every command's start (issue #27).
    from . import collect, controller, gc_tuning, run, select
    from .state import STATE_KEY, HelmbenchState

    state = config.stash[STATE_KEY] = HelmbenchState(config)
    # Registered before pytest's unraisable-exception plugin registers its own cleanup, so it runs after
    # that cleanup's full garbage collection, which therefore skips the frozen items.
    config.add_cleanup(lambda: gc_tuning.unfreeze(config))
    config.addinivalue_line("markers", MARKER)
    manager = config.pluginmanager
    manager.register(collect.BenchmarkHooks(state.base_dir), "helmbench-benchmark")  # which benchmark
    if not manager.has_plugin("helmbench-builtins"):
        manager.register(Builtins(), "helmbench-builtins")
    for phase in (collect, select, run):
        manager.register(phase, f"helmbench-{phase.__name__.rpartition('.')[2]}")
    if not state.is_worker:
        manager.register(controller.ControllerHooks(state), "helmbench-controller")
    _register_outputs(config, state)


class Builtins:
    """HELMBench's own evaluators and providers, through the hooks a conftest.py or plugin implements
    too (hookspecs.py); the built-in providers come last, so another plugin's can take over an id."""

    def pytest_helmbench_register_evaluators(self, registry: EvaluatorRegistry) -> None:
        from ..evaluation.builtin import add_builtins

        add_builtins(registry)

    @HookimplMarker("pytest")(trylast=True)  # pytest.hookimpl, without importing pytest
    def pytest_helmbench_register_providers(self, registry: ProviderRegistry) -> None:
        from ..providers.builtin import add_builtins

        add_builtins(registry)


def _register_outputs(config: pytest.Config, state: HelmbenchState) -> None:
    """The hooks of optional plugins, registered only when those plugins are there (pytest rejects
    hooks it does not know: `-p no:xdist` and `-p no:html` must work)."""
    from .outputs import HtmlSummaryHooks, JunitHooks

    manager = config.pluginmanager
    if not state.is_worker:
        manager.register(JunitHooks(config), "helmbench-junit")
    if manager.hasplugin("xdist"):
        from .xdist import XdistHooks

        manager.register(XdistHooks(state), "helmbench-xdist")
    if manager.hasplugin("html"):
        manager.register(HtmlSummaryHooks(state), "helmbench-html")
