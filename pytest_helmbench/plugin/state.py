"""Per-process HELMBench state for one pytest session: settings, loader, executor, recorder, tallies.

Everything is created lazily, so a pytest session that collects no HELMBench case touches no
database, no network and no benchmark file (the plugin is loaded in every pytest session).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
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
from ..execution.fleet import FleetRole, fleet_role
from ..execution.outcome import Outcome, provenance
from ..execution.shared import SharedFiles
from ..providers.ratelimit import AdaptiveLimiter
from ..redaction import redact_data
from ..reporting.tally import Tally
from ..status import RunStatus
from ..suite.cases import Case
from ..suite.files import parse_file_size
from ..suite.loader import SCENARIO_FILE_LIKE, BenchmarkLoader
from ..suite.model import Scenario
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
        self.answered_early: Callable[[], Sequence[Outcome]] = tuple  # Prefetch.answered, while it runs
        self._warned: set[str] = set()
        workerinput = getattr(config, "workerinput", None)
        self.shared = SharedFiles.from_workerinput(workerinput) if workerinput else SharedFiles.new()
        self._options: dict[str, dict[str, Any]] = {}
        self._options_checked = False
        self._option_error: ConfigError | None = None

    @staticmethod
    def get(config: pytest.Config) -> HelmbenchState:
        return config.stash[STATE_KEY]

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
        from ..storage.fleet import shared_stops

        return shared_stops(self.fleet, self.settings.db_url) if keyed else None

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
        from ..providers.pool import ClientPool

        return ClientPool(
            self.settings,
            self.providers,
            base_dir=self.base_dir,
            limiter=self.limiter,
            shared_file=self.shared.providers if self.is_worker else None,
            benchmark_dir=self.root,
            evaluation_types=self.evaluators,
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
        return self.loader.load_scenario_file(md_path)

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
        """Nothing is sent for this model: --helmbench-dry-run, or no key where its provider needs one."""
        needs_key = self.providers.for_model(model_id).needs_key(self.settings.model(model_id))
        return self.settings.is_dry_run(needs_key=needs_key, model=self.settings.model(model_id))

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
    def resume_request(self) -> tuple[str, bool] | None:
        """('latest' or a run id, errors_only) with --helmbench-resume or --helmbench-retry-errors."""
        resume, retry = self.option("resume"), self.option("retry-errors")
        if resume and retry:
            raise HelmbenchError("--helmbench-resume and --helmbench-retry-errors do not combine: use one")
        if resume or retry:
            return (str(resume), False) if resume else (str(retry), True)
        return None

    def prepare_resume(self) -> ResumePlan | None:
        """Controller: read the run(s) to continue, adopt them (`--co` only previews), share the plan."""
        wanted = self.resume_request()
        if wanted is None or self.all_dry_run():
            return None
        from ..storage.prior_runs import build_plan

        self.open_storage()
        assert self.recorder is not None
        key = self.fleet.run_key if self.fleet is not None else None
        plan = build_plan(self.recorder.engine, self.settings.model_ids, wanted[0], wanted[1], run_key=key)
        adopting = {} if self.config.getoption("collectonly") else plan.runs
        for model, run_id in adopting.items():
            self.recorder.adopt(model, run_id, self.run_options(model))
        if adopting:  # a run key's stops are lifted: its key fixed, its credit topped up
            self.recorder.lift_stops([*plan.runs, *self.settings.judge_ids])
        self.shared.ensure()
        plan.save(self.shared.resume_plan)
        return plan

    def load_plan(self) -> ResumePlan | None:
        from ..execution.resume import ResumePlan

        return ResumePlan.load(self.shared.resume_plan) if self.shared.resume_plan.is_file() else None

    def save_resume_counts(self, counts: dict[str, int]) -> None:
        self.resume_counts = counts
        self.shared.save_resume_counts(counts)

    def read_resume_counts(self) -> dict[str, int]:
        found = self.shared.load_resume_counts()  # a worker's, under xdist
        return self.resume_counts if found is None else found

    # --- recording ---------------------------------------------------------------------------
    def record(self, outcome: Outcome) -> None:
        """Store one outcome (controller only) and count it for the summary."""
        tally = self.tallies.setdefault(outcome.model, Tally())
        tally.add(outcome)
        if self.storage_error:
            return
        try:
            self.open_storage()
            assert self.recorder is not None
            ahead = self.answered_early()  # finished answers not yet reported: stored with this one
            tally.run_id = self.recorder.record(outcome, self.run_options(outcome.model), ahead)
        except HelmbenchError as exc:
            self.storage_error = str(exc)
            log.error("HELMBench: %s", exc)
            if self.session is not None:
                self.session.shouldstop = f"HELMBench cannot record results: {exc}"

    def run_options(self, model: str) -> dict[str, Any]:
        """What is stored with a model's EvaluationRun: worked out once per model, not per Result."""
        found = self._options.get(model)
        if found is None:
            found = self._options[model] = redact_data(  # no password, userinfo or key is stored
                self.settings.recorded(self.settings.model(model))
                | {"pytest_args": list(self.config.invocation_params.args)}
            )
        return found

    def stopped_models(self) -> dict[str, str]:
        """Models stopped by any process of this session or of its run key (never creates the folder)."""
        return self.board.stopped() if "board" in self.__dict__ or self.shared.exists() else {}

    def finish(self, interrupted: bool) -> None:
        """Close the runs. After a storage failure they are marked interrupted if that still fits
        (`--helmbench-resume` finds them either way); a failure here is one more storage error."""
        stopped = self.stopped_models()
        if self.recorder is not None:
            failed = self.storage_error is not None
            models = set(self.tallies) | set(self.recorder.runs)
            # A run with cases skipped at the cost ceiling or timed out is not complete (resumable).
            short = {m for m, tally in self.tallies.items() if tally.unfinished()} | self.incomplete
            statuses = {
                m: RunStatus.INTERRUPTED
                if interrupted or failed or m in stopped or m in short
                else RunStatus.COMPLETED
                for m in models
            }
            try:
                if self.fleet is not None and not failed:
                    wanted = [m for m in self.settings.model_ids if not self.is_dry_run(m)]
                    self.recorder.join_missing(wanted, {m: self.run_options(m) for m in wanted})
                self.recorder.finish(statuses, write_cache=not failed)
                from ..reporting.run_record import end_session

                recorded = (self.recorder, self.settings, self.loader, self.evaluators, self.tallies)
                self.judge_lines = end_session(*recorded, store_figures=not failed)
            except HelmbenchError as exc:
                self.storage_error = self.storage_error or str(exc)
                log.error("HELMBench: %s", exc)
            finally:
                self.recorder.close()
        self.close_clients()

    def close_clients(self) -> None:
        for opened in ("clients", "cache"):  # only those made (cached properties): the cache may be None
            if self.__dict__.get(opened) is not None:
                self.__dict__[opened].close()

    def cleanup(self) -> None:
        """Stop local model servers and remove the shared temporary folder (controller, at the end)."""
        if "clients" in self.__dict__:
            self.clients.close()  # idempotent: stops what the providers started (local model servers)
        if not self.is_worker:
            self.shared.remove()
