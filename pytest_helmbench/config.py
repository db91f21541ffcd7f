"""Run settings: models.yml plus options, resolved command line > environment > ini > default."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .codes import LAYOUTS
from .errors import ConfigError
from .models_file import (  # noqa: F401  (re-exported: models.yml lives in its own module)
    API_KINDS,
    ModelConfig,
    ModelsFile,
    is_http_url,
    load_models_file,
)
from .redaction import Secret, redact
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

DRY_RUN_REASON = "dry run"
CACHE_MODES = ("off", "read", "write", "on")


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
    prices_file: Path | None = None  # --helmbench-prices (read by providers/prices.py)
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
    # The panel of judges (the first is `marking_model`); how their verdicts combine; how many calls of
    # a lone judge make each judged verdict in a critical scenario (their majority rules; odd).
    marking_models: tuple[ModelConfig, ...] = ()
    judge_policy: str = "majority"
    critical_votes: int = 3
    # The layouts every case is sent in (suite/prompt.py), and who plays simulated users.
    layouts: tuple[str, ...] = ("seed",)
    user_model: ModelConfig | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.api_key, Secret):  # a plain string from a caller: held as a Secret
            object.__setattr__(self, "api_key", Secret(str(self.api_key or "")))
        if not self.marking_models and self.marking_model is not None:
            object.__setattr__(self, "marking_models", (self.marking_model,))
        if self.marking_models and self.marking_model is None:
            object.__setattr__(self, "marking_model", self.marking_models[0])

    @property
    def judge_ids(self) -> list[str]:
        """The panel's model ids, in the order given."""
        return [m.id for m in self.marking_models]

    @property
    def user_agent(self) -> ModelConfig | None:
        """Who writes a simulated user's turns: --helmbench-user-model, else models.yml's `user_model`,
        else the first marking model."""
        return self.user_model or self.marking_model

    @property
    def helper_ids(self) -> list[str]:
        """Every model a case may call besides the model under test: the judges and the user agent."""
        agent = self.user_agent
        return list(dict.fromkeys([*self.judge_ids, *([agent.id] if agent is not None else [])]))

    @property
    def model_ids(self) -> list[str]:
        return [m.id for m in self.models]

    def model(self, model_id: str) -> ModelConfig:
        for model in self.models:
            if model.id == model_id:
                return model
        for judge in (*self.marking_models, *([self.user_model] if self.user_model else [])):
            if judge.id == model_id:
                return judge
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

    def key_optional(self, model: ModelConfig) -> bool:
        """An OpenAI-compatible server other than OpenRouter (`--helmbench-api openai` with a base URL of
        its own: Ollama, vLLM, llama.cpp, LM Studio) is called without OPENROUTER_API_KEY when it is
        unset (with no Authorization header); a server that wants a key then answers 401, which stops
        the model with that reason, never a silent dry run."""
        return self.self_hosted(model)

    def self_hosted(self, model: ModelConfig) -> bool:
        """Called on an OpenAI-compatible server other than OpenRouter: no key needed, and no cost
        reported with its answers."""
        return (model.api or self.api) == "openai" and not is_openrouter(model.base_url or self.base_url)

    def missing_key(self, model: ModelConfig) -> str | None:
        """The environment variable whose absence makes `model` (of a provider that needs a key) a dry
        run, or None when its calls can be made."""
        credential = self.credential(model)
        if credential is None or credential.key:
            return None
        if credential.env == KEY_ENV and not model.api_key_env and self.key_optional(model):
            return None
        return credential.env

    def is_dry_run(self, *, needs_key: bool, model: ModelConfig | None = None) -> bool:
        """Nothing is sent with --helmbench-dry-run, or when a model whose provider needs a key is
        meant to get one (`credential`) and its variable is not set (`missing_key`)."""
        if self.dry_run:
            return True
        if not needs_key:
            return False
        if model is None:
            return not self.api_key
        return self.missing_key(model) is not None

    def with_keys(self, model_keys: dict[str, Secret]) -> Settings:
        return replace(self, model_keys=model_keys)

    def recorded(self, model: ModelConfig) -> dict[str, Any]:
        return {
            "model": model.recorded(),
            "marking_model": self.marking_model.recorded() if self.marking_model else None,
            "marking_models": [judge.recorded() for judge in self.marking_models],
            "judge_policy": self.judge_policy,
            "critical_votes": self.critical_votes,
            "layouts": list(self.layouts),
            "user_model": self.user_agent.recorded() if self.user_agent else None,
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


# Ids whose part before `/` names no model family: the built-in oracles answer from the benchmark's
# own gold labels, so an oracle judging an oracle is not a family judging itself.
NO_FAMILY = ("oracle",)


def provider_family(model_id: str) -> str | None:
    """A model id's provider family: the part before the first `/` (None without one, or an oracle)."""
    family, slash, _ = model_id.partition("/")
    return family.lower() if slash and family and family.lower() not in NO_FAMILY else None


def family_warning(model_id: str, judge_ids: Iterable[str]) -> str | None:
    """The warning when a judge of `model_id`'s cases comes from its own provider family (a family
    judging itself tends to rate it higher), else None."""
    family = provider_family(model_id)
    same = [judge for judge in judge_ids if family is not None and provider_family(judge) == family]
    if not same:
        return None
    return (
        f"warning: {model_id} is judged by {', '.join(same)}, of its own provider family ({family}): "
        "a model family judging itself tends to rate it higher; add a judge of another family "
        "(--helmbench-marking-model a,b) and compare"
    )


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
    used = [
        *settings.models,
        *settings.marking_models,
        *([settings.user_model] if settings.user_model else []),
    ]
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
    `base_url_source` says where `get("base-url")` came from (plugin/state.py passes `option_source`'s)."""
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
    marking_ids = _judge_ids(get("marking-model") or models_file.marking_model)
    policy = str(get("judge-policy") or "majority")
    if policy not in JUDGE_POLICIES:
        raise ConfigError(f"--helmbench-judge-policy: {policy!r} must be one of {', '.join(JUDGE_POLICIES)}")
    layouts = _layouts(get("layout"))
    user_ids = _judge_ids(get("user-model") or models_file.user_model)
    if len(user_ids) > 1:
        raise ConfigError(f"--helmbench-user-model: {get('user-model')!r} names more than one model")
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
        marking_model=models_file.get(marking_ids[0]) if marking_ids else None,
        marking_models=tuple(models_file.get(i) for i in marking_ids),
        judge_policy=policy,
        critical_votes=_critical_votes(get("critical-votes")),
        layouts=layouts,
        user_model=models_file.get(user_ids[0]) if user_ids else None,
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
        prices_file=Path(str(get("prices"))).expanduser() if get("prices") else None,
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
    helpers = (*settings.marking_models, *([settings.user_model] if settings.user_model else []))
    return settings.with_keys(_model_keys((*settings.models, *helpers)))


JUDGE_POLICIES = ("majority", "all-pass", "any-fail")
DEFAULT_CRITICAL_VOTES = 3


def _critical_votes(value: Any) -> int:
    """--helmbench-critical-votes: an odd number from 1 (a majority always exists)."""
    votes = _number(value if value not in (None, "") else DEFAULT_CRITICAL_VOTES, "critical-votes", int, 1)
    if votes % 2 == 0:
        raise ConfigError(
            f"--helmbench-critical-votes: {votes} is even: a majority needs an odd number of calls "
            f"(1, 3, 5, …; default {DEFAULT_CRITICAL_VOTES})"
        )
    return votes


def _layouts(value: Any) -> tuple[str, ...]:
    """`seed`, `deployed` or both, comma-separated, in the order given (default: seed)."""
    names = list(dict.fromkeys(n.strip() for n in str(value or "seed").split(",") if n.strip()))
    bad = [n for n in names if n not in LAYOUTS]
    if bad or not names:
        raise ConfigError(
            f"--helmbench-layout: {value!r} must be seed, deployed or seed,deployed (comma-separated)"
        )
    return tuple(names)


def _judge_ids(value: Any) -> list[str]:
    """`a,b,c` (option) or a models.yml id: the panel, in order, without repeats."""
    if not value:
        return []
    return list(dict.fromkeys(i.strip() for i in str(value).split(",") if i.strip()))


def api_key_from_env() -> Secret:
    """OPENROUTER_API_KEY, checked (a TrustError names the problem, never the key); empty when unset."""
    return check_key(os.environ.get(KEY_ENV, ""), KEY_ENV)
