"""Per-process HELMBench state for one pytest session: settings, loader, executor, recorder, tallies.

Everything is created lazily, so a pytest session that collects no HELMBench case touches no
database, no network and no benchmark file (the plugin is loaded in every pytest session).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .codes import SCENARIO_FILE
from .config import (
    LOCAL_PREFIX,
    OPTIONS,
    Option,
    Settings,
    api_key_from_env,
    build_settings,
    env_flag,
    load_models_file,
)
from .errors import HelmbenchError
from .execution.budget import CostLedger
from .execution.outcome import Outcome
from .providers.ratelimit import AdaptiveLimiter
from .reporting.analytics import CaseResult
from .status import RunStatus, Status
from .suite.loader import BenchmarkLoader, Scenario

# This module is loaded in every pytest session (through the plugin), so the modules that pull in
# SQLAlchemy, Alembic and httpx (~0.5 s) are imported where a run first needs them.
if TYPE_CHECKING:
    from .evaluation.registry import EvaluatorRegistry
    from .execution.executor import ClientPool, Executor, StopBoard
    from .execution.resume import ResumePlan
    from .storage.cache import ResponseCache
    from .storage.recorder import Recorder

log = logging.getLogger(__name__)

STATE_KEY = pytest.StashKey["HelmbenchState"]()


def option_dest(name: str) -> str:
    return "helmbench_" + name.replace("-", "_")


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line, then environment variable, then ini, then the default."""
    cli = config.getoption(option_dest(option.name), None)
    if cli not in (None, [], False):
        return cli
    if (
        option.kind == "optional"
        and option.env
        and os.environ.get(option.env, "").strip().lower() in ("1", "true", "yes", "on")
    ):
        return option.const
    env = os.environ.get(option.env, "") if option.env else ""
    if env.strip():
        if option.kind == "bool":
            return env_flag(env)
        return [env] if option.kind == "list" else env
    ini = config.getini(option_dest(option.name))
    if ini not in (None, "", [], False):
        return ini if option.kind != "list" else [ini]
    return option.default


def case_result(outcome: Outcome) -> CaseResult:
    """The analytics view of an outcome (codes, severities, style, status)."""
    prov = outcome.provenance
    scenario, condition, context, perturbation = (
        prov["scenario"],
        prov["condition"],
        prov["user_context"],
        prov["perturbation"],
    )
    return CaseResult(
        model=outcome.model,
        run_id=None,
        case_code=outcome.case_code,
        pillar=prov["pillar"]["code"],
        behaviour=prov["behaviour"]["code"],
        scenario=scenario["code"],
        condition=condition["code"],
        condition_severity=condition["severity"],
        user_context=context["code"] if context else None,
        user_context_severity=context["severity"] if context else 0,
        perturbation=perturbation["code"],
        perturbation_severity=perturbation["severity"],
        perturbation_style=perturbation["style"],
        status=outcome.status,
        critical=bool(scenario["critical"]),
        repeat=outcome.repeat,
    )


@dataclass
class Tally:
    """What the terminal summary says of one model."""

    results: list[CaseResult] = field(default_factory=list)
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0
    latencies: list[float] = field(default_factory=list)
    run_id: int | None = None

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    def add(self, outcome: Outcome) -> None:
        self.results.append(case_result(outcome))
        self.cost_usd += outcome.cost_usd or 0.0
        self.judge_cost_usd += outcome.judge_cost_usd or 0.0
        self.prompt_tokens += outcome.prompt_tokens or 0
        self.completion_tokens += outcome.completion_tokens or 0
        self.cached += outcome.cached
        if outcome.latency_ms is not None and not outcome.cached:
            self.latencies.append(outcome.latency_ms)


class HelmbenchState:
    """The HELMBench side of one pytest process (controller, worker, or plain serial run)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.session: pytest.Session | None = None
        self.recorder: Recorder | None = None
        self.storage_error: str | None = None
        self.tallies: dict[str, Tally] = {}
        self.dry_run_skips = 0
        self.resume_counts: dict[str, int] = {}
        self.local_servers: list[Any] = []
        self.decision: Any = None
        self._warned: set[str] = set()
        workerinput = getattr(config, "workerinput", {})
        self.session_id: str = workerinput.get("helmbench_session_id") or uuid.uuid4().hex
        self._shared: str = workerinput.get("helmbench_shared") or ""
        self.local_urls: dict[str, str] = {}
        self._options: dict[str, dict[str, Any]] = {}

    @staticmethod
    def get(config: pytest.Config) -> HelmbenchState:
        return config.stash[STATE_KEY]

    @cached_property
    def base_dir(self) -> Path:
        """The rootdir; without any pytest config file, the invocation folder (where the user stands),
        because pytest then takes the arguments' common ancestor (`benchmark/` itself) as rootdir."""
        return self.config.rootpath if self.config.inipath else self.config.invocation_params.dir

    @cached_property
    def root(self) -> Path:
        value = self.config.getini("helmbench_root") or "benchmark"
        return (self.base_dir / value).resolve()

    @cached_property
    def scenarios_dir(self) -> str:
        return str(self.root / "scenarios")

    def is_scenario_file(self, path: Path) -> bool:
        """Only `S<n>.md` files directly inside a folder of `<root>/scenarios` are collected."""
        return (
            path.suffix == ".md"
            and SCENARIO_FILE.match(path.name) is not None
            and str(path.parent.parent) == self.scenarios_dir
        )

    @cached_property
    def evaluators(self) -> EvaluatorRegistry:
        """Every evaluation type, built-in or from a conftest/plugin, gathered once per process."""
        from .evaluation.registry import EvaluatorRegistry

        registry = EvaluatorRegistry()
        self.config.hook.pytest_helmbench_register_evaluators(registry=registry)
        return registry

    @cached_property
    def loader(self) -> BenchmarkLoader:
        return BenchmarkLoader(self.root, evaluation_types=self.evaluators)

    @cached_property
    def settings(self) -> Settings:
        """Resolved once; a bad option or models.yml raises a HelmbenchError naming the fix."""
        models_file = load_models_file(self.root / "models.yml")
        return build_settings(lambda name: self.option(name), models_file, self.base_dir, api_key_from_env())

    def option(self, name: str) -> Any:
        return option_value(self.config, next(o for o in OPTIONS if o.name == name))

    @cached_property
    def shared_dir(self) -> Path:
        """A folder every process of the session shares: stop board, spend ledger, resume plan."""
        if not self._shared:
            self._shared = tempfile.mkdtemp(prefix="helmbench-")
        return Path(self._shared)

    @cached_property
    def board(self) -> StopBoard:
        from .execution.executor import StopBoard

        return StopBoard(self.shared_dir / "stops", cross_process=self.is_worker)

    @cached_property
    def ledger(self) -> CostLedger | None:
        limit = self.settings.max_cost
        return CostLedger(self.shared_dir / "spend.txt", limit) if limit is not None else None

    @cached_property
    def limiter(self) -> AdaptiveLimiter:
        concurrency = 1 if self.is_worker else self.settings.concurrency
        return AdaptiveLimiter(concurrency)

    @cached_property
    def clients(self) -> ClientPool:
        from .execution.executor import ClientPool

        return ClientPool(self.settings, self.local_url, self.limiter)

    @cached_property
    def cache(self) -> ResponseCache | None:
        settings = self.settings
        if settings.cache_mode == "off":
            return None
        from .storage.cache import ResponseCache
        from .storage.recorder import make_engine

        return ResponseCache(lambda: make_engine(settings.db_url), settings.cache_mode, settings.cache_ttl)

    @cached_property
    def executor(self) -> Executor:
        from .execution.executor import Executor

        return Executor(
            self.settings,
            self.loader.info(),
            self.clients,
            self.board,
            self.cache,
            self.ledger,
            evaluators=self.evaluators,
        )

    def load_scenario(self, md_path: Path) -> Scenario:
        scenario = self.loader.load_scenario(md_path.parent)
        if md_path.name != scenario.path.name:
            raise HelmbenchError(
                f"{md_path}: does not match its folder {md_path.parent.name} (expected {scenario.path.name})\n  fix: rename or remove it"
            )
        return scenario

    def new_warnings(self) -> list[str]:
        fresh = [w for w in dict.fromkeys(self.loader.warnings) if w not in self._warned]
        self._warned.update(fresh)
        return fresh

    def workerinput(self) -> dict[str, str]:
        return {"helmbench_session_id": self.session_id, "helmbench_shared": str(self.shared_dir)}

    def share_local_urls(self) -> None:
        """Controller: tell xdist workers where the embedded local models listen (read at their first call)."""
        if self.local_urls:
            (self.shared_dir / "local-urls.json").write_text(json.dumps(self.local_urls), encoding="utf-8")

    def local_url(self, model_id: str) -> str | None:
        """Where an embedded local model listens; xdist workers read what the controller shared."""
        if (
            model_id not in self.local_urls
            and model_id.startswith(LOCAL_PREFIX)
            and self.is_worker
            and self._shared
        ):
            path = self.shared_dir / "local-urls.json"
            if path.is_file():
                self.local_urls.update(json.loads(path.read_text(encoding="utf-8")))
        return self.local_urls.get(model_id)

    def all_dry_run(self) -> bool:
        settings = self.settings
        return all(settings.is_dry_run(m) for m in settings.models)

    def open_storage(self) -> None:
        """Migrate and open the database before any call is paid for (controller only)."""
        if self.recorder is None and not self.is_worker:
            from .storage.recorder import Recorder

            self.recorder = Recorder(self.settings.db_url, self.session_id)

    # --- resume / retry errors -------------------------------------------------------------
    @property
    def plan_path(self) -> Path:
        return self.shared_dir / "resume.json"

    def resume_request(self) -> tuple[str, bool] | None:
        """('latest' or a run id, errors_only) when --helmbench-resume or --helmbench-retry-errors is given."""
        resume, retry = self.option("resume"), self.option("retry-errors")
        if resume and retry:
            raise HelmbenchError("--helmbench-resume and --helmbench-retry-errors do not combine: use one")
        if resume:
            return str(resume), False
        if retry:
            return str(retry), True
        return None

    def prepare_resume(self) -> ResumePlan | None:
        """Controller: read the run(s) to continue, adopt them, and share the plan with workers."""
        wanted = self.resume_request()
        if wanted is None or self.all_dry_run():
            return None
        from .execution.resume import build_plan

        self.open_storage()
        assert self.recorder is not None
        plan = build_plan(self.recorder.engine, self.settings.model_ids, wanted[0], wanted[1])
        for model, run_id in plan.runs.items():
            self.recorder.adopt(model, run_id, self.settings.recorded(self.settings.model(model)))
        plan.save(self.plan_path)
        return plan

    def load_plan(self) -> ResumePlan | None:
        if not (self._shared and self.plan_path.is_file()):
            return None
        from .execution.resume import ResumePlan

        return ResumePlan.load(self.plan_path)

    def save_resume_counts(self, counts: dict[str, int]) -> None:
        self.resume_counts = counts
        (self.shared_dir / "resume-counts.json").write_text(json.dumps(counts), encoding="utf-8")

    def read_resume_counts(self) -> dict[str, int]:
        path = self.shared_dir / "resume-counts.json" if self._shared else None
        if path is not None and path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        return self.resume_counts

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
            tally.run_id = self.recorder.record(outcome, self._run_options(outcome.model))
        except HelmbenchError as exc:
            self.storage_error = str(exc)
            log.error("HELMBench: %s", exc)
            if self.session is not None:
                self.session.shouldstop = f"HELMBench cannot record results: {exc}"

    def _run_options(self, model: str) -> dict[str, Any]:
        """What is stored with a model's EvaluationRun: worked out once per model, not per Result."""
        found = self._options.get(model)
        if found is None:
            found = self._options[model] = self.settings.recorded(self.settings.model(model)) | {
                "pytest_args": list(self.config.invocation_params.args)
            }
        return found

    def stopped_models(self) -> dict[str, str]:
        """Models stopped by any process of this session (never creates the shared folder)."""
        return self.board.stopped() if self._shared else {}

    def finish(self, interrupted: bool) -> None:
        stopped = self.stopped_models()
        if self.recorder is not None and not self.storage_error:
            models = set(self.tallies) | set(self.recorder.runs)
            # A run with cases skipped at the cost ceiling is not complete: `--helmbench-resume` finds it.
            short = {m for m, tally in self.tallies.items() if tally.count(Status.SKIPPED)}
            statuses = {
                m: RunStatus.INTERRUPTED if interrupted or m in stopped or m in short else RunStatus.COMPLETED
                for m in models
            }
            self.recorder.finish(statuses)
            self.recorder.close()
        self.close_clients()

    def close_clients(self) -> None:
        if "clients" in self.__dict__:
            self.clients.close()
        if "cache" in self.__dict__ and self.cache is not None:
            self.cache.close()

    def cleanup(self) -> None:
        """Stop local model servers and remove the shared temporary folder (controller, at the end)."""
        for server in self.local_servers:
            server.stop()
        self.local_servers.clear()
        if self._shared and not self.is_worker:
            shutil.rmtree(self._shared, ignore_errors=True)
