"""Per-process HELMBench state for one pytest session: what the phases share, and nothing they do.

`HelmbenchState` holds the session's values (settings, tallies, notes) and builds its services
(loader, evaluators, providers, executor, recorder) lazily, so a pytest session that collects no
HELMBench case touches no database, no network and no benchmark file (the plugin is loaded in every
pytest session). The work is the phases': selecting (select.py), running (run.py), recording and
finishing (controller.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..benchmark_root import session_benchmark
from ..config import (
    Settings,
    api_key_from_env,
    build_settings,
    load_models_file,
)
from ..errors import BenchmarkError, ConfigError, HelmbenchError
from ..execution.budget import CostLedger, StopBoard
from ..execution.outcome import Outcome, provenance
from ..execution.selection import RunSelection
from ..execution.shared import SharedFiles
from ..execution.unpriced import Unpriced
from ..providers.ratelimit import AdaptiveLimiter
from ..redaction import redact_data
from ..reporting.tally import Tally
from ..suite.cases import Case, Selector, parse_selectors
from ..suite.files import parse_file_size
from ..suite.loader import SCENARIO_FILE_LIKE, BenchmarkLoader, check_scenario_file_name
from ..suite.model import Scenario
from ..suite.shards import FleetRole, fleet_role
from .options import check_options, option_named, option_source, option_value

# This module is loaded in every pytest session (through the plugin), so the modules that pull in
# SQLAlchemy, Alembic and httpx (~0.5 s) are imported where a run first needs them.
if TYPE_CHECKING:
    from ..evaluation.registry import EvaluatorRegistry
    from ..execution.executor import Executor
    from ..execution.resume import ResumePlan
    from ..providers.pool import ClientPool
    from ..providers.registry import ProviderRegistry
    from ..storage.cache import ResponseCache
    from ..storage.recorder import Recorder

log = logging.getLogger(__name__)


@dataclass
class SessionNotes:
    """What the session says about itself besides pass and fail, per model: what it selected (is the
    run a subset of the benchmark), its calls without a price, and under --helmbench-shard what every
    shard selected together (the keyed run's selection). Kept by the process that writes."""

    selections: dict[str, RunSelection] = field(default_factory=dict)
    unpriced: dict[str, Unpriced] = field(default_factory=dict)
    unsharded: dict[str, set[str]] = field(default_factory=dict)
    # With --helmbench-run-key: per model, the selection every process of the key must share
    # (execution.selection.run_fingerprints), stored with the run and checked by storage/fleet.py.
    run_selection: dict[str, dict[str, Any]] = field(default_factory=dict)


STATE_KEY = pytest.StashKey["HelmbenchState"]()


class HelmbenchState:
    """The HELMBench side of one pytest process (controller, worker, or plain serial run)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.session: pytest.Session | None = None
        self.recorder: Recorder | None = None
        self.storage_error: str | None = None
        self.incomplete: set[str] = set()  # models whose run may not end completed (a worker crashed)
        self.tallies: dict[str, Tally] = {}
        self.dry_run_skips = 0
        self.resume_counts: dict[str, int] = {}
        self.decision: Any = None
        self.judge_lines: list[str] = []  # each judge's calibration, said in the summary
        self.notes = SessionNotes()
        self.answered_early: Callable[[], Sequence[Outcome]] = tuple  # Prefetch.answered, while it runs
        self._warned: set[str] = set()
        workerinput = getattr(config, "workerinput", None)
        self.shared = SharedFiles.from_workerinput(workerinput) if workerinput else SharedFiles.new()
        self._options: dict[str, dict[str, Any]] = {}
        self._options_checked = False
        self._option_error: ConfigError | None = None
        self._scenarios: dict[Path, Scenario | HelmbenchError] = {}
        self._dry_runs: dict[str, bool] = {}

    @staticmethod
    def get(config: pytest.Config) -> HelmbenchState:
        return config.stash[STATE_KEY]

    def built(self, service: str) -> bool:
        """Whether a lazily built service (a cached property such as `ledger`) exists yet: asked at the
        end of a session, which must not build one only to find it empty."""
        return service in self.__dict__

    @cached_property
    def base_dir(self) -> Path:
        """The rootdir; without any pytest config file, the invocation folder (where the user stands),
        because pytest then takes the arguments' common ancestor (`benchmark/` itself) as rootdir."""
        return self.config.rootpath if self.config.inipath else self.config.invocation_params.dir

    @cached_property
    def root(self) -> Path:  # the project's benchmark, or the installed one (benchmark_root.py)
        return session_benchmark(self.config, self.base_dir).path

    @cached_property
    def scenarios_dir(self) -> str:
        return str(self.root / "scenarios")

    def is_scenario_file(self, path: Path) -> bool:
        """`S<n>.md` (and look-alikes: a misnamed one is an error) in a folder of `<root>/scenarios`."""
        return (
            path.suffix == ".md"
            and SCENARIO_FILE_LIKE.match(path.name) is not None
            and str(path.parent.parent) == self.scenarios_dir
        )

    @cached_property
    def evaluators(self) -> EvaluatorRegistry:
        """Every evaluation type, built-in or from a conftest/plugin, gathered once per process."""
        from ..evaluation.registry import EvaluatorRegistry

        registry = EvaluatorRegistry()
        self.config.hook.pytest_helmbench_register_evaluators(registry=registry)
        return registry

    @cached_property
    def loader(self) -> BenchmarkLoader:
        max_file_size = parse_file_size(self.option("max-file-size"))
        return BenchmarkLoader(self.root, evaluation_types=self.evaluators, max_file_size=max_file_size)

    @cached_property
    def settings(self) -> Settings:
        """Resolved once; a bad option or models.yml raises a HelmbenchError naming the fix."""
        models_file = load_models_file(self.root / "models.yml")
        source = option_source(self.config, option_named("base-url"))
        return build_settings(
            self.option, models_file, self.base_dir, api_key_from_env(), base_url_source=source
        )

    def option(self, name: str) -> Any:
        return option_value(self.config, option_named(name))

    def options_usable(self) -> bool:
        """Checked by each scenario file before it collects. A bad option or setting (ConfigError) is
        raised once, by the first file, as its collection error (a string, so xdist shows the workers'
        identical ones once); the other files then collect nothing, instead of one error each."""
        if not self._options_checked:
            self._options_checked = True
            try:
                check_options(self.config)
                _ = self.settings, self.loader
            except ConfigError as exc:
                self._option_error = exc
                raise
        return self._option_error is None

    @property
    def session_id(self) -> str:
        return self.shared.session_id

    @cached_property
    def fleet(self) -> FleetRole | None:
        """--helmbench-run-key (with --helmbench-shard): this process's part of a run shared by many."""
        return fleet_role(self.option("run-key"), self.option("shard"))

    @cached_property
    def board(self) -> StopBoard:
        self.shared.ensure()
        return StopBoard(self.shared.stops, cross_process=self.is_worker, shared=self._fleet_stops())

    def _fleet_stops(self) -> Any:
        """The run key's stops in the database (none without a key, or with nothing to send)."""
        try:
            keyed = self.fleet is not None and not self.all_dry_run()
        except ConfigError:  # said once at collection: nothing is sent
            keyed = False
        if not keyed:
            return None
        from ..storage.fleet import (
            shared_stops,  # the fleet's tables: a session without a key never needs them
        )

        return shared_stops(self.fleet, self.settings.db_url)

    @cached_property
    def ledger(self) -> CostLedger | None:
        limit = self.settings.max_cost
        if limit is None:
            return None
        self.shared.ensure()
        from ..storage.fleet import shared_spend  # with a run key: one ceiling for all its processes

        return CostLedger(self.shared.spend, limit, shared_spend(self.fleet, self.settings.db_url))

    @cached_property
    def limiter(self) -> AdaptiveLimiter:
        concurrency = 1 if self.is_worker else self.settings.concurrency
        return AdaptiveLimiter(concurrency)

    @cached_property
    def providers(self) -> ProviderRegistry:
        """Every provider of this process, from the register-providers hook (the built-ins' too)."""
        from ..providers.registry import ProviderRegistry

        return ProviderRegistry.from_hook(self.config.hook)

    @cached_property
    def clients(self) -> ClientPool:
        from ..providers.base import ProviderContext
        from ..providers.pool import ClientPool

        context = ProviderContext(
            self.settings,
            self.base_dir,
            limiter=self.limiter,
            benchmark_dir=self.root,
            evaluation_types=self.evaluators,
            scenario_of=self.scenario,
        )
        return ClientPool(
            context, self.providers, shared_file=self.shared.providers if self.is_worker else None
        )

    @cached_property
    def cache(self) -> ResponseCache | None:
        settings = self.settings
        if settings.cache_mode == "off":
            return None
        from ..storage.cache import ResponseCache
        from ..storage.engine import make_engine

        return ResponseCache(lambda: make_engine(settings.db_url), settings.cache_mode, settings.cache_ttl)

    @cached_property
    def executor(self) -> Executor:
        from ..execution.executor import Executor

        return Executor(
            self.settings,
            self.loader.info(),
            self.clients,
            self.board,
            self.cache,
            self.ledger,
            evaluators=self.evaluators,
            resources=self._resources(),
        )

    def _resources(self) -> Any:
        """resources.yml for resource_check; a broken one already failed the scenarios that use it."""
        try:
            return self.loader.resources()
        except BenchmarkError:
            return None

    def load_scenario(self, md_path: Path) -> Scenario:
        """The scenario of a collected `S<n>.md`-like file (its folder's S<n>.md)."""
        check_scenario_file_name(md_path)
        return self.scenario(md_path.parent)

    def scenario(self, folder: Path) -> Scenario:
        """A scenario folder's scenario, loaded once per process: collection, the sample drawn at
        collection, the run's case count and the helper check all ask. An error is raised again."""
        found = self._scenarios.get(folder)
        if found is None:
            try:
                found = self.loader.load_scenario(folder)
            except HelmbenchError as exc:
                found = exc
            self._scenarios[folder] = found
        if isinstance(found, HelmbenchError):
            raise found
        return found

    @cached_property
    def drawn_at_collection(self) -> frozenset[str] | None:
        """--helmbench-sample's codes when the sample can be drawn before the items are built (nothing
        but --helmbench-select narrows the session: collection_sample.py); else None."""
        from .collection_sample import sample_at_collection

        return sample_at_collection(
            self.config, self.settings, self.loader, self.scenario, self.selected, self.may_select
        )

    def collects(self, case: Case) -> bool:
        """Whether this case becomes an item: --helmbench-select keeps it, and so does the sample when
        it was drawn at collection."""
        drawn = self.drawn_at_collection
        return self.selected(case) and (drawn is None or case.code in drawn)

    @cached_property
    def selectors(self) -> list[Selector]:
        """--helmbench-select's patterns (checked at session start: a bad one is a usage error)."""
        return parse_selectors(self.option("select") or [])

    def selected(self, case: Case) -> bool:
        """Whether --helmbench-select keeps this case (every case without the option)."""
        if not self.selectors:
            return True
        segments = case.segments
        return any(selector.matches(segments) for selector in self.selectors)

    def may_select(self, scenario: Scenario) -> bool:
        """Whether --helmbench-select can keep a case of this scenario (by its P, B and S segments)."""
        return not self.selectors or any(s.may_match_scenario(scenario.code) for s in self.selectors)

    def new_warnings(self) -> list[str]:
        fresh = [w for w in dict.fromkeys(self.loader.warnings) if w not in self._warned]
        self._warned.update(fresh)
        return fresh

    def workerinput(self) -> dict[str, str]:
        return self.shared.to_workerinput()

    def share_provider_data(self) -> None:
        """Controller, after the providers' `prepare`: what xdist workers need (local servers' URLs),
        read by each worker before its first call."""
        self.shared.ensure()
        self.clients.share(self.shared.providers)

    def is_dry_run(self, model_id: str) -> bool:
        """Nothing is sent for this model: --helmbench-dry-run, or no key where its provider needs one.
        Asked by every case (twice) and of judges too: worked out once per model."""
        known = self._dry_runs.get(model_id)
        if known is None:
            model = self.settings.model(model_id)
            needs_key = self.providers.for_model(model_id).needs_key(model)
            known = self._dry_runs[model_id] = self.settings.is_dry_run(needs_key=needs_key, model=model)
        return known

    def all_dry_run(self) -> bool:
        return all(self.is_dry_run(m) for m in self.settings.model_ids)

    def open_storage(self) -> None:
        """Migrate and open the database before any call is paid for (controller only)."""
        if self.recorder is None and not self.is_worker:
            from ..storage.recorder import Recorder

            self.recorder = Recorder(self.settings.db_url, self.session_id, self.fleet)

    def prepare_content(self, cases: Sequence[Case]) -> None:
        """Write the content rows of these cases at once (storage/content.py). Only a speed-up: after
        a failure the first Result writes them, and says what is wrong."""
        if not cases or self.recorder is None:
            return
        try:
            info = self.loader.info()
            self.recorder.prepare_content(provenance(case, info) for case in cases)
        except HelmbenchError as exc:
            log.debug("content rows left to the first Result: %s", exc)

    # --- resume / retry errors -------------------------------------------------------------
    def load_plan(self) -> ResumePlan | None:
        from ..execution.resume import ResumePlan

        return ResumePlan.load(self.shared.resume_plan) if self.shared.resume_plan.is_file() else None

    def save_resume_counts(self, counts: dict[str, int]) -> None:
        self.resume_counts = counts
        self.shared.save_resume_counts(counts)

    def read_resume_counts(self) -> dict[str, int]:
        found = self.shared.load_resume_counts()  # a worker's, under xdist
        return self.resume_counts if found is None else found

    def baseline(self) -> dict[str, Any] | None:
        """--helmbench-baseline's per-model verdicts (read once; None without it); ConfigError when the
        file cannot be read, or --helmbench-fail-on-regression is given without it."""
        if "_baseline" not in self.__dict__:
            path = self.option("baseline")
            if not path and self.option("fail-on-regression"):
                raise ConfigError("--helmbench-fail-on-regression needs --helmbench-baseline FILE")
            from ..reporting.compare import BaselineError, load_baseline

            try:
                self.__dict__["_baseline"] = load_baseline(Path(str(path))) if path else None
            except BaselineError as exc:
                raise ConfigError(f"--helmbench-baseline: {exc}") from None
        return self.__dict__["_baseline"]

    def run_options(self, model: str) -> dict[str, Any]:
        """What is stored with a model's EvaluationRun: worked out once per model, not per Result;
        with a run key, once cases are selected, the selection its processes must share."""
        found = self._options.get(model)
        if found is None:
            found = self._options[model] = redact_data(  # no password, userinfo or key is stored
                self.settings.recorded(self.settings.model(model))
                | {"pytest_args": list(self.config.invocation_params.args)}
            )
        chosen = self.notes.run_selection.get(model)
        return found if chosen is None else {**found, "selection": chosen}

    def stopped_models(self) -> dict[str, str]:
        """Models stopped by any process of this session or of its run key (never creates the folder)."""
        return self.board.stopped() if self.built("board") or self.shared.exists() else {}

    def close_clients(self) -> None:
        for opened in ("clients", "cache"):  # only those made (cached properties): the cache may be None
            if self.built(opened) and getattr(self, opened) is not None:
                getattr(self, opened).close()

    def cleanup(self) -> None:
        """Stop local model servers and remove the shared temporary folder (controller, at the end)."""
        if self.built("clients"):
            self.clients.close()  # idempotent: stops what the providers started (local model servers)
        if not self.is_worker:
            self.shared.remove()
