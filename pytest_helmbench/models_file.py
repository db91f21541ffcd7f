"""models.yml: the default models and the marking (judge) model, each with its own request settings.

Read through the confined reader (a benchmark's models.yml is untrusted input); every typo or bad
value is a BenchmarkError naming the file and the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import BenchmarkError
from .trust import KEY_ENV, is_openrouter

API_KINDS = ("openrouter", "openai")

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
_TOP_KEYS = ("marking_model", "models", "user_model")
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
    user_model: str | None = None  # who writes a simulated user's turns (else the first marking model)

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


LOCAL_PREFIX = "local/"  # the embedded local provider's ids (providers/local/ids.py)


def _local_path_check(model_id: str, path: Path, name: str) -> None:
    """A `local/` GGUF path named in models.yml stays inside the project: relative, without `..` or
    `~` (the file is a stranger's: `local//etc/shadow` would be opened). An absolute path is for the
    command line (`--helmbench-model local//abs/x.gguf`), which the user types."""
    if not model_id.startswith(LOCAL_PREFIX):
        return
    weights = model_id[len(LOCAL_PREFIX) :]
    if weights.startswith(("/", "~", "\\")) or ".." in Path(weights).parts or ":" in weights:
        raise BenchmarkError(
            path,
            f"{name}: a local model's path in models.yml must be relative to the rootdir, without '..' "
            "or '~' (a benchmark tree may not point at files outside the project)",
            fix="put the .gguf file in the project and write local/path/to/model.gguf, or pass an absolute "
            "path on the command line: --helmbench-model local//abs/path/model.gguf",
        )


def _model_entry(entry: Any, path: Path, index: int) -> ModelConfig:
    if isinstance(entry, str):
        _local_path_check(entry, path, f"models[{index}] ({entry})")
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
    _local_path_check(entry["id"], path, f"models[{index}] ({entry['id']})")
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
    from .suite.files import BenchmarkFiles  # with its YAML parser, only when a models.yml is read: the
    from .suite.markdown import load_yaml  # `helmbench` commands import this module at start (issue #27)

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
    for judge in str(marking or "").split(","):
        _local_path_check(judge.strip(), path, f"marking_model ({judge.strip()})")
    user = data.get("user_model")
    if user is not None and (not isinstance(user, str) or not user.strip() or "," in user):
        raise BenchmarkError(
            path,
            "'user_model' must be one model id",
            fix="write user_model: <id>, the model that writes a simulated user's turns",
        )
    if user is not None:
        _local_path_check(user.strip(), path, f"user_model ({user.strip()})")
    models = tuple(_model_entry(e, path, i) for i, e in enumerate(entries))
    return ModelsFile(marking, models, user.strip() if user is not None else None)
