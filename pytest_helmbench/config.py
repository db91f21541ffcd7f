"""Run settings: models.yml plus options, resolved command line > environment > ini > default."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import BenchmarkError, ConfigError
from .redaction import Secret, redact
from .suite.files import BenchmarkFiles
from .suite.markdown import load_yaml
from .trust import (
    KEY_ENV,
    OPENROUTER_BASE_URL,  # noqa: F401  (re-exported: options.py and providers read it here)
    Credential,
    OptionSource,
    TrustError,  # noqa: F401  (re-exported)
    check_key,
    check_transport,
    is_openrouter,
)

API_KINDS = ("openrouter", "openai")
DRY_RUN_REASON = "dry run"
CACHE_MODES = ("off", "read", "write", "on")

# Request settings a models.yml entry may carry (besides `id`); anything else is an error so typos surface.
_MODEL_KEYS = {
    "id",
    "base_url",
    "api",
    "max_tokens",
    "temperature",
    "seed",
    "timeout",
    "reasoning",
    "provider",
    "extra_body",
    "api_key_env",
}
_TOP_KEYS = ("marking_model", "models")
# Request fields extra_body may not set: they are what a Result records as asked (model, prompt, schema)
# and how the answer is read (one JSON body, not a stream).
_RESERVED_BODY = ("messages", "model", "response_format", "stream")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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
    api_key_env: str | None = None

    def recorded(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) not in (None, {})
        }


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


def is_http_url(value: Any) -> bool:
    """An API base URL must name its scheme and host: without them every call would fail as if the
    network were down, and be retried, instead of stopping at once with this message."""
    return isinstance(value, str) and re.match(r"https?://[^/\s]+", value.strip()) is not None


def _model_checks(entry: dict[str, Any], path: Path, index: int) -> None:
    """The settings that would let a models.yml entry leak a key or change what is recorded."""
    name = f"models[{index}] ({entry['id']})"
    env = entry.get("api_key_env")
    if env is not None and (not isinstance(env, str) or not _ENV_NAME.match(env)):
        raise BenchmarkError(path, f"{name}: api_key_env must be the name of an environment variable")
    if env == KEY_ENV and not is_openrouter(entry.get("base_url")):
        raise BenchmarkError(
            path,
            f"{name}: {KEY_ENV} goes only to OpenRouter or to the base URL given on the command line or "
            "in the environment, not to a models.yml base_url",
            fix="give this server a key variable of its own: 'api_key_env: MY_SERVER_KEY'",
        )
    reserved = sorted(set(entry.get("extra_body") or {}) & set(_RESERVED_BODY))
    if reserved:
        raise BenchmarkError(
            path,
            f"{name}: extra_body may not set {', '.join(reserved)} (they are what a result records)",
            fix="remove them from extra_body: the model is 'id', prompt and schema come from the scenario",
        )


def _model_entry(entry: Any, path: Path, index: int) -> ModelConfig:
    if isinstance(entry, str):
        return ModelConfig(entry)
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise BenchmarkError(
            path,
            f"models[{index}] must be a model id or a mapping with an 'id'",
            fix="e.g. '- id: openai/gpt-4o-mini'",
        )
    if "api_key" in entry:
        raise BenchmarkError(
            path,
            f"models[{index}] ({entry['id']}): a literal 'api_key' is never read from models.yml "
            "(the file is shared, the key is not)",
            fix="keep the key in an environment variable and name it: 'api_key_env: MY_SERVER_KEY'",
        )
    unknown = set(entry) - _MODEL_KEYS
    if unknown:
        raise BenchmarkError(
            path,
            f"models[{index}] ({entry['id']}): unknown setting(s) {', '.join(sorted(unknown))}",
            fix=f"use only {', '.join(sorted(_MODEL_KEYS))}",
        )
    for key in ("reasoning", "provider", "extra_body"):
        if key in entry and not isinstance(entry[key], dict):
            raise BenchmarkError(path, f"models[{index}] ({entry['id']}): '{key}' must be a mapping")
    _model_checks(entry, path, index)
    if "base_url" in entry and not is_http_url(entry["base_url"]):
        raise BenchmarkError(
            path,
            f"models[{index}] ({entry['id']}): base_url {entry['base_url']!r} is not an http(s) URL",
            fix="write e.g. base_url: http://localhost:8000/v1",
        )
    if entry.get("api") not in (None, *API_KINDS):
        raise BenchmarkError(
            path, f"models[{index}] ({entry['id']}): api must be one of {', '.join(API_KINDS)}"
        )
    return ModelConfig(
        **{k: v for k, v in entry.items() if k != "extra_body"},
        extra_body=dict(entry.get("extra_body") or {}),
    )


def load_models_file(path: Path) -> ModelsFile:
    """Parse models.yml; a missing file means no default models."""
    files = BenchmarkFiles(path.parent)  # a stranger's file: no link out of the root, no FIFO, no alias
    if not files.is_file(path):
        return ModelsFile(None, ())
    data = load_yaml(files.read_text(path), path) or {}
    if not isinstance(data, dict):
        raise BenchmarkError(path, "models.yml must be a mapping with 'marking_model' and 'models'")
    unknown = sorted(str(key) for key in data if key not in _TOP_KEYS)
    if unknown:
        raise BenchmarkError(
            path,
            f"unknown top-level key(s) {', '.join(unknown)}",
            fix=f"use only {', '.join(_TOP_KEYS)}; a model's own settings go under its entry in 'models'",
        )
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
    concurrency: int = 1
    cache_mode: str = "off"
    cache_ttl: float | None = None
    max_cost: float | None = None
    repeat: int = 1
    sample: int | None = None
    sample_seed: int = 0
    fail_under: float | None = None
    api_key: Secret = field(default_factory=Secret, repr=False)
    # Where base_url came from: the key goes to it only from the command line or the environment.
    base_url_source: OptionSource = OptionSource.DEFAULT
    # The keys models.yml entries name with api_key_env, by variable name.
    model_keys: dict[str, Secret] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.api_key, Secret):  # a plain string from a caller: held as a Secret
            object.__setattr__(self, "api_key", Secret(str(self.api_key or "")))

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

    def credential(self, model: ModelConfig) -> Credential | None:
        """The key `model`'s calls carry; None: its endpoint gets none (a keyless server still works).

        OPENROUTER_API_KEY goes only to OpenRouter's default URL or a base URL given on the command line
        or in the environment; a base URL from an ini file or models.yml gets the key its model names
        with api_key_env, else none."""
        if model.api_key_env:
            return Credential(model.api_key_env, self.model_keys.get(model.api_key_env, Secret()))
        url = model.base_url or self.base_url
        trusted = model.base_url is None and self.base_url_source in (OptionSource.CLI, OptionSource.ENV)
        if trusted or is_openrouter(url):
            return Credential(KEY_ENV, self.api_key)
        return None

    def is_dry_run(self, *, needs_key: bool, model: ModelConfig | None = None) -> bool:
        """Nothing is sent with --helmbench-dry-run, or when a model whose provider needs a key is
        meant to get one (`credential`) and its variable is not set."""
        if self.dry_run:
            return True
        if not needs_key:
            return False
        credential = self.credential(model) if model is not None else Credential(KEY_ENV, self.api_key)
        return credential is not None and not credential.key

    def with_keys(self, model_keys: dict[str, Secret]) -> Settings:
        return replace(self, model_keys=model_keys)

    def recorded(self, model: ModelConfig) -> dict[str, Any]:
        return {
            "model": model.recorded(),
            "marking_model": self.marking_model.recorded() if self.marking_model else None,
            "base_url": redact(model.base_url or self.base_url),
            "api": model.api or self.api,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "timeout": self.timeout,
            "retries": self.retries,
            "backoff": self.backoff,
            "concurrency": self.concurrency,
            "cache": self.cache_mode,
            "cache_ttl_seconds": self.cache_ttl,
            "max_cost_usd": self.max_cost,
            "repeat": self.repeat,
            "sample": self.sample,
            "sample_seed": self.sample_seed,
            "fail_under": self.fail_under,
        }


def parse_ttl(text: str | None) -> float | None:
    """'30d', '12h', '45m', '90s' or plain seconds; empty means no expiry."""
    if not text:
        return None
    units = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
    value = text.strip().lower()
    factor = units.get(value[-1], None)
    number = value[:-1] if factor else value
    try:
        seconds = float(number) * (factor or 1.0)
    except ValueError:
        raise ValueError(
            f"--helmbench-cache-ttl: {text!r} is not a duration like 30d, 12h, 45m or 90s"
        ) from None
    if seconds <= 0:
        raise ValueError("--helmbench-cache-ttl must be positive")
    return seconds


def _number(raw: Any, name: str, cast: Callable[[str], Any], low: float | None = None) -> Any:
    try:
        value = cast(str(raw))
    except ValueError:
        raise ConfigError(f"--helmbench-{name}: {raw!r} is not a valid {cast.__name__}") from None
    if not math.isfinite(value):  # float("nan") and float("inf") parse, but no setting means them
        raise ConfigError(f"--helmbench-{name}: {raw!r} is not a finite number")
    if low is not None and value < low:
        raise ConfigError(f"--helmbench-{name}: must be at least {low}")
    return value


def _model_keys(models: Iterable[ModelConfig]) -> dict[str, Secret]:
    """The environment variables models.yml names with api_key_env, read and checked once."""
    names = sorted({m.api_key_env for m in models if m.api_key_env})
    return {name: check_key(os.environ.get(name, ""), name) for name in names}


def _check_endpoints(settings: Settings, allow_insecure: bool) -> None:
    check_transport(settings.base_url, "--helmbench-base-url / OPENROUTER_BASE_URL", allow_insecure)
    used = [*settings.models, *([settings.marking_model] if settings.marking_model else [])]
    for model in used:
        if model.base_url:
            check_transport(model.base_url, f"models.yml: {model.id}: base_url", allow_insecure)


def build_settings(
    get: Callable[[str], Any],
    models_file: ModelsFile,
    rootdir: Path,
    api_key: str | Secret,
    *,
    base_url_source: OptionSource = OptionSource.CLI,
) -> Settings:
    """Resolve options (via `get(name)`, already merged CLI > env > ini > default) into Settings;
    `base_url_source` says where `get("base-url")` came from (state.py passes `option_source`'s)."""
    ids = [m.strip() for value in (get("model") or []) for m in str(value).split(",") if m.strip()]
    if not ids:
        ids = [m.id for m in models_file.models]
    if not ids:
        raise ConfigError(
            "no model to evaluate: pass --helmbench-model=<id> or list models in the benchmark's models.yml"
        )
    base_url = str(get("base-url")).strip().rstrip("/")
    if not is_http_url(base_url):
        raise ConfigError(
            f"--helmbench-base-url / OPENROUTER_BASE_URL: {base_url!r} is not an http(s) URL; write e.g. http://localhost:8000/v1"
        )
    api = str(get("api"))
    if api not in API_KINDS:
        raise ConfigError(f"--helmbench-api: {api!r} must be one of {', '.join(API_KINDS)}")
    marking_id = get("marking-model") or models_file.marking_model
    seed = get("seed")
    temperature = _number(get("temperature"), "temperature", float, 0)
    cache_mode = str(get("cache") or ("on" if temperature == 0 else "off"))
    if cache_mode not in CACHE_MODES:
        raise ConfigError(f"--helmbench-cache: {cache_mode!r} must be one of {', '.join(CACHE_MODES)}")
    try:
        cache_ttl = parse_ttl(get("cache-ttl"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    optional = {name: get(name) for name in ("max-cost", "sample", "fail-under")}
    settings = Settings(
        models=tuple(models_file.get(i) for i in dict.fromkeys(ids)),
        marking_model=models_file.get(marking_id) if marking_id else None,
        db_url=str(get("db") or f"sqlite:///{rootdir / 'helmbench.db'}"),
        base_url=base_url,
        api=api,
        dry_run=bool(get("dry-run")),
        temperature=temperature,
        max_tokens=_number(get("max-tokens"), "max-tokens", int, 1),
        seed=_number(seed, "seed", int) if seed not in (None, "") else None,
        timeout=_number(get("timeout"), "timeout", float, 0.001),
        retries=_number(get("retries"), "retries", int, 0),
        backoff=_number(get("backoff"), "backoff", float, 0),
        concurrency=_number(get("concurrency"), "concurrency", int, 1),
        cache_mode=cache_mode,
        cache_ttl=cache_ttl,
        max_cost=_number(optional["max-cost"], "max-cost", float, 0) if optional["max-cost"] else None,
        repeat=_number(get("repeat"), "repeat", int, 1),
        sample=_number(optional["sample"], "sample", int, 1) if optional["sample"] else None,
        sample_seed=_number(get("sample-seed"), "sample-seed", int),
        fail_under=_number(optional["fail-under"], "fail-under", float, 0)
        if optional["fail-under"]
        else None,
        api_key=api_key if isinstance(api_key, Secret) else check_key(api_key, KEY_ENV),
        base_url_source=base_url_source,
    )
    _check_endpoints(settings, bool(get("allow-insecure")))
    judge = (settings.marking_model,) if settings.marking_model else ()
    return settings.with_keys(_model_keys((*settings.models, *judge)))


def api_key_from_env() -> Secret:
    """OPENROUTER_API_KEY, checked (a TrustError names the problem, never the key); empty when unset."""
    return check_key(os.environ.get(KEY_ENV, ""), KEY_ENV)
