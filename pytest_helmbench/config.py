"""Run settings: models.yml plus options, resolved command line > environment > ini > default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

from .errors import BenchmarkError, ConfigError
from .markdown import load_yaml, read_text

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
API_KINDS = ("openrouter", "openai")
LOCAL_PREFIX = "local/"
KEY_ENV = "OPENROUTER_API_KEY"
DRY_RUN_REASON = "dry run"

# Request settings a models.yml entry may carry (besides `id`); anything else is an error so typos surface.
_MODEL_KEYS = {"id", "base_url", "api", "max_tokens", "temperature", "seed", "timeout", "reasoning", "provider", "extra_body"}


@dataclass(frozen=True)
class ModelConfig:
    """One model and its own request settings (unset fields fall back to the run's options)."""

    id: str
    base_url: str | None = None
    api: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    timeout: float | None = None
    reasoning: dict[str, Any] | None = None
    provider: dict[str, Any] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.id.startswith(LOCAL_PREFIX)

    def recorded(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) not in (None, {})}


@dataclass(frozen=True)
class ModelsFile:
    """benchmark/models.yml: the default models and the marking (judge) model."""

    marking_model: str | None
    models: tuple[ModelConfig, ...]

    def get(self, model_id: str) -> ModelConfig:
        for model in self.models:
            if model.id == model_id:
                return model
        return ModelConfig(model_id)


def _model_entry(entry: Any, path: Path, index: int) -> ModelConfig:
    if isinstance(entry, str):
        return ModelConfig(entry)
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise BenchmarkError(path, f"models[{index}] must be a model id or a mapping with an 'id'", fix="e.g. '- id: openai/gpt-4o-mini'")
    unknown = set(entry) - _MODEL_KEYS
    if unknown:
        raise BenchmarkError(path, f"models[{index}] ({entry['id']}): unknown setting(s) {', '.join(sorted(unknown))}", fix=f"use only {', '.join(sorted(_MODEL_KEYS))}")
    for key in ("reasoning", "provider", "extra_body"):
        if key in entry and not isinstance(entry[key], dict):
            raise BenchmarkError(path, f"models[{index}] ({entry['id']}): '{key}' must be a mapping")
    if entry.get("api") not in (None, *API_KINDS):
        raise BenchmarkError(path, f"models[{index}] ({entry['id']}): api must be one of {', '.join(API_KINDS)}")
    return ModelConfig(**{k: v for k, v in entry.items() if k != "extra_body"}, extra_body=dict(entry.get("extra_body") or {}))


def load_models_file(path: Path) -> ModelsFile:
    """Parse models.yml; a missing file means no default models."""
    if not path.is_file():
        return ModelsFile(None, ())
    data = load_yaml(read_text(path), path) or {}
    if not isinstance(data, dict):
        raise BenchmarkError(path, "models.yml must be a mapping with 'marking_model' and 'models'")
    entries = data.get("models") or []
    if not isinstance(entries, list):
        raise BenchmarkError(path, "'models' must be a list")
    marking = data.get("marking_model")
    if marking is not None and not isinstance(marking, str):
        raise BenchmarkError(path, "'marking_model' must be a model id")
    return ModelsFile(marking, tuple(_model_entry(e, path, i) for i, e in enumerate(entries)))


@dataclass(frozen=True)
class Settings:
    """Everything a run needs; `recorded()` is what is stored with each EvaluationRun (never the key)."""

    models: tuple[ModelConfig, ...]
    marking_model: ModelConfig | None
    db_url: str
    base_url: str
    api: str
    dry_run: bool
    temperature: float
    max_tokens: int
    seed: int | None
    timeout: float
    retries: int
    backoff: float
    api_key: str = field(default="", repr=False)

    @property
    def model_ids(self) -> list[str]:
        return [m.id for m in self.models]

    def model(self, model_id: str) -> ModelConfig:
        for model in self.models:
            if model.id == model_id:
                return model
        if self.marking_model and self.marking_model.id == model_id:
            return self.marking_model
        return ModelConfig(model_id)

    def needs_key(self, model: ModelConfig) -> bool:
        return not model.is_local

    def is_dry_run(self, model: ModelConfig) -> bool:
        """Nothing is sent with --helmbench-dry-run, or without a key for a model that needs one."""
        return self.dry_run or (self.needs_key(model) and not self.api_key)

    def recorded(self, model: ModelConfig) -> dict[str, Any]:
        return {
            "model": model.recorded(),
            "marking_model": self.marking_model.recorded() if self.marking_model else None,
            "base_url": model.base_url or self.base_url,
            "api": model.api or self.api,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "timeout": self.timeout,
            "retries": self.retries,
            "backoff": self.backoff,
        }


@dataclass(frozen=True)
class Option:
    """One --helmbench-* option with its ini twin and environment variable."""

    name: str
    help: str
    env: str | None = None
    default: Any = None
    kind: str = "string"  # string | bool | list


OPTIONS: tuple[Option, ...] = (
    Option("model", "model id(s) to evaluate; comma-separated and repeatable (default: models.yml)", "HELMBENCH_MODEL", kind="list"),
    Option("marking-model", "judge model for sqe scenarios (default: models.yml marking_model)", "HELMBENCH_MARKING_MODEL"),
    Option("db", "SQLAlchemy URL of the results database (default: sqlite file helmbench.db in the rootdir)", "HELMBENCH_DB"),
    Option("base-url", "API base URL (default: OpenRouter's /api/v1)", "OPENROUTER_BASE_URL", OPENROUTER_BASE_URL),
    Option("api", "openrouter (default) or openai (standard fields only: Ollama, vLLM, llama.cpp, LM Studio)", "HELMBENCH_API", "openrouter"),
    Option("dry-run", "compose and validate every case, send nothing, record nothing", "HELMBENCH_DRY_RUN", False, "bool"),
    Option("temperature", "sampling temperature (default 0)", "HELMBENCH_TEMPERATURE", "0"),
    Option("max-tokens", "max_tokens per call (default 4096)", "HELMBENCH_MAX_TOKENS", "4096"),
    Option("seed", "sampling seed sent with every call (default: none)", "HELMBENCH_SEED"),
    Option("timeout", "seconds per HTTP call before it is retried (default 120)", "HELMBENCH_TIMEOUT", "120"),
    Option("retries", "retries of a transient failure (429, 5xx, timeouts) before the case errors (default 5)", "HELMBENCH_RETRIES", "5"),
    Option("backoff", "first retry delay in seconds, doubled each retry, capped at 60 (default 1)", "HELMBENCH_BACKOFF", "1"),
    Option("select", "segment-aware code selection, e.g. P1-B1-S1 (never P1-B1-S10), C2, U0 (no user context); comma-separated, repeatable", "HELMBENCH_SELECT", kind="list"),
)


def _number(raw: Any, name: str, cast: Callable[[str], Any], low: float | None = None) -> Any:
    try:
        value = cast(str(raw))
    except ValueError:
        raise ConfigError(f"--helmbench-{name}: {raw!r} is not a valid {cast.__name__}") from None
    if low is not None and value < low:
        raise ConfigError(f"--helmbench-{name}: must be at least {low}")
    return value


def build_settings(get: Callable[[str], Any], models_file: ModelsFile, rootdir: Path, api_key: str) -> Settings:
    """Resolve options (via `get(name)`, already merged CLI > env > ini > default) into Settings."""
    ids = [m.strip() for value in (get("model") or []) for m in str(value).split(",") if m.strip()]
    if not ids:
        ids = [m.id for m in models_file.models]
    if not ids:
        raise ConfigError("no model to evaluate: pass --helmbench-model=<id> or list models in the benchmark's models.yml")
    api = str(get("api"))
    if api not in API_KINDS:
        raise ConfigError(f"--helmbench-api: {api!r} must be one of {', '.join(API_KINDS)}")
    marking_id = get("marking-model") or models_file.marking_model
    seed = get("seed")
    return Settings(
        models=tuple(models_file.get(i) for i in dict.fromkeys(ids)),
        marking_model=models_file.get(marking_id) if marking_id else None,
        db_url=str(get("db") or f"sqlite:///{rootdir / 'helmbench.db'}"),
        base_url=str(get("base-url")).rstrip("/"),
        api=api,
        dry_run=bool(get("dry-run")),
        temperature=_number(get("temperature"), "temperature", float, 0),
        max_tokens=_number(get("max-tokens"), "max-tokens", int, 1),
        seed=_number(seed, "seed", int) if seed not in (None, "") else None,
        timeout=_number(get("timeout"), "timeout", float, 0.001),
        retries=_number(get("retries"), "retries", int, 0),
        backoff=_number(get("backoff"), "backoff", float, 0),
        api_key=api_key,
    )


def env_flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def api_key_from_env() -> str:
    return os.environ.get(KEY_ENV, "").strip()


def with_models(settings: Settings, models: tuple[ModelConfig, ...]) -> Settings:
    return replace(settings, models=models)
