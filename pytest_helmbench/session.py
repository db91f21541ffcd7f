"""Per-process HELMBench state for one pytest session: settings, loader, executor, recorder, tallies.

Everything is created lazily, so a pytest session that collects no HELMBench case touches no
database, no network and no benchmark file (the plugin is loaded in every pytest session).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from .config import OPTIONS, Option, Settings, api_key_from_env, build_settings, env_flag, load_models_file
from .errors import HelmbenchError
from .loader import SCENARIO_FILE, BenchmarkLoader, Scenario
from .outcome import ERROR, FAILED, PASSED, SKIPPED, Outcome
from .runner import ClientPool, Executor, StopBoard
from .storage import Recorder

log = logging.getLogger(__name__)

STATE_KEY = pytest.StashKey["HelmbenchSession"]()


def option_dest(name: str) -> str:
    return "helmbench_" + name.replace("-", "_")


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line, then environment variable, then ini, then the default."""
    cli = config.getoption(option_dest(option.name), None)
    if cli not in (None, [], False):
        return cli
    env = os.environ.get(option.env, "") if option.env else ""
    if env.strip():
        if option.kind == "bool":
            return env_flag(env)
        return [env] if option.kind == "list" else env
    ini = config.getini(option_dest(option.name))
    if ini not in (None, "", [], False):
        return ini if option.kind != "list" else [ini]
    return option.default


@dataclass
class Tally:
    """What the terminal summary says of one model."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    run_id: int | None = None

    def add(self, outcome: Outcome) -> None:
        self.passed += outcome.status == PASSED
        self.failed += outcome.status == FAILED
        self.errors += outcome.status == ERROR
        self.skipped += outcome.status == SKIPPED
        self.cost_usd += outcome.cost_usd or 0.0
        self.judge_cost_usd += outcome.judge_cost_usd or 0.0
        self.prompt_tokens += outcome.prompt_tokens or 0
        self.completion_tokens += outcome.completion_tokens or 0
        if outcome.latency_ms is not None:
            self.latencies.append(outcome.latency_ms)


class HelmbenchSession:
    """The HELMBench side of one pytest process (controller, worker, or plain serial run)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.session: pytest.Session | None = None
        self.recorder: Recorder | None = None
        self.storage_error: str | None = None
        self.tallies: dict[str, Tally] = {}
        self.dry_run_skips = 0
        self.collected_cases = 0
        self._warned: set[str] = set()
        workerinput = getattr(config, "workerinput", {})
        self.session_id: str = workerinput.get("helmbench_session_id") or uuid.uuid4().hex
        self._board_dir: str = workerinput.get("helmbench_board") or ""

    @staticmethod
    def get(config: pytest.Config) -> "HelmbenchSession":
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
        return path.suffix == ".md" and SCENARIO_FILE.match(path.name) is not None and str(path.parent.parent) == self.scenarios_dir

    @cached_property
    def loader(self) -> BenchmarkLoader:
        return BenchmarkLoader(self.root)

    @cached_property
    def settings(self) -> Settings:
        """Resolved once; a bad option or models.yml raises a HelmbenchError naming the fix."""
        models_file = load_models_file(self.root / "models.yml")
        return build_settings(lambda name: option_value(self.config, _option(name)), models_file, self.base_dir, api_key_from_env())

    @cached_property
    def board(self) -> StopBoard:
        if not self._board_dir:
            self._board_dir = tempfile.mkdtemp(prefix="helmbench-stops-")
        return StopBoard(Path(self._board_dir))

    @cached_property
    def clients(self) -> ClientPool:
        return ClientPool(self.settings)

    @cached_property
    def executor(self) -> Executor:
        return Executor(self.settings, self.loader.info(), self.clients, self.board)

    def load_scenario(self, md_path: Path) -> Scenario:
        scenario = self.loader.load_scenario(md_path.parent)
        if md_path.name != scenario.path.name:
            raise HelmbenchError(f"{md_path}: does not match its folder {md_path.parent.name} (expected {scenario.path.name})\n  fix: rename or remove it")
        return scenario

    def new_warnings(self) -> list[str]:
        fresh = [w for w in dict.fromkeys(self.loader.warnings) if w not in self._warned]
        self._warned.update(fresh)
        return fresh

    def workerinput(self) -> dict[str, str]:
        return {"helmbench_session_id": self.session_id, "helmbench_board": str(self.board.folder)}

    def all_dry_run(self) -> bool:
        settings = self.settings
        return all(settings.is_dry_run(m) for m in settings.models)

    def open_storage(self) -> None:
        """Migrate and open the database before any call is paid for (controller only)."""
        if self.recorder is None and not self.is_worker:
            self.recorder = Recorder(self.settings.db_url, self.session_id)

    def record(self, outcome: Outcome) -> None:
        """Store one outcome (controller only) and count it for the summary."""
        tally = self.tallies.setdefault(outcome.model, Tally())
        tally.add(outcome)
        if self.storage_error:
            return
        try:
            self.open_storage()
            assert self.recorder is not None
            tally.run_id = self.recorder.record(outcome, self.settings.recorded(self.settings.model(outcome.model)) | {"pytest_args": list(self.config.invocation_params.args)})
        except HelmbenchError as exc:
            self.storage_error = str(exc)
            log.error("HELMBench: %s", exc)
            if self.session is not None:
                self.session.shouldstop = f"HELMBench cannot record results: {exc}"

    def finish(self, interrupted: bool) -> None:
        stopped = self.board.stopped()
        if self.recorder is not None and not self.storage_error:
            statuses = {m: "interrupted" if interrupted or m in stopped else "completed" for m in self.tallies}
            self.recorder.finish(statuses)
            self.recorder.close()
        if "clients" in self.__dict__:
            self.clients.close()

    def cleanup(self) -> None:
        """Remove the stop board's temporary folder (controller, at the very end)."""
        if "board" in self.__dict__ and not self.is_worker:
            shutil.rmtree(self.board.folder, ignore_errors=True)


def _option(name: str) -> Option:
    return next(o for o in OPTIONS if o.name == name)
