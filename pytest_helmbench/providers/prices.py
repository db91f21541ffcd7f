"""--helmbench-prices FILE: prices for models the API's /models does not price, or for when it cannot
be reached (offline, a firewall, a self-hosted server that bills elsewhere).

Two forms, told apart by their content:
- a saved copy of an OpenRouter-style `GET /models` answer (JSON: `{"data": [{"id": …, "pricing":
  {"prompt": "0.00000015", "completion": "0.0000006", "request": "0"}}]}`), as the API gives it;
- YAML (or JSON) mapping each model id to its prices in USD per token:
  `openai/gpt-4o-mini: {prompt: 0.00000015, completion: 0.0000006}` (`request:` optional).

A price in the file replaces the one /models gives: the file is what the user chose. The file is
untrusted input: it is size-capped, read with the guarded loaders (no YAML aliases, bounded nesting),
and every price must be a finite number >= 0, else a ConfigError names the file, the entry and the fix.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..jsontext import JsonRejected, loads_strict
from ..suite.markdown import yaml_load
from .chat import Pricing

MAX_PRICE_FILE_BYTES = 20 * 1024 * 1024  # /models lists a few hundred models: about 1 MB
_FIX = "write each model as `model/id: {prompt: USD per token, completion: USD per token}`"


def price_file(path: Path | None) -> Mapping[str, Pricing]:
    """The prices of --helmbench-prices (none without it), read once per process: the session checked
    the file before collection (plugin/collect.py), so a bad one never gets this far."""
    return _read_once(path) if path is not None else {}


@functools.cache
def _read_once(path: Path) -> Mapping[str, Pricing]:
    return read_price_file(path)


def read_price_file(path: Path) -> dict[str, Pricing]:
    """Each model's Pricing from the file at `path` (see the module's docstring for the forms)."""
    where = f"--helmbench-prices {path}"
    try:
        if path.stat().st_size > MAX_PRICE_FILE_BYTES:
            raise ConfigError(
                f"{where}: larger than {MAX_PRICE_FILE_BYTES // 2**20} MB; keep the models you run"
            )
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: is not UTF-8 text") from None
    data = _parse(text, where)
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return _from_models_answer(data["data"], where)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: holds no mapping of model ids to prices; {_FIX}")
    return {str(model): _pricing(entry, f"{where}: {model}") for model, entry in data.items()}


def _parse(text: str, where: str) -> Any:
    if text.lstrip().startswith(("{", "[")):
        try:
            return loads_strict(text)
        except (JsonRejected, ValueError) as exc:
            raise ConfigError(f"{where}: is not valid JSON ({exc})") from None
    try:
        return yaml_load(text)  # safe: no alias, bounded nesting
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: is not valid YAML ({str(exc).splitlines()[0]})") from None


def _from_models_answer(entries: list[Any], where: str) -> dict[str, Pricing]:
    """A saved /models answer: entries without an id or pricing (free-text models, routers) are skipped,
    as the API's own answer is read."""
    prices: dict[str, Pricing] = {}
    for index, entry in enumerate(entries):
        if (
            isinstance(entry, dict)
            and isinstance(entry.get("id"), str)
            and isinstance(entry.get("pricing"), dict)
        ):
            prices[entry["id"]] = _pricing(entry["pricing"], f"{where}: data[{index}] ({entry['id']})")
    return prices


def _pricing(entry: Any, where: str) -> Pricing:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: is not a mapping of prices; {_FIX}")
    unknown = sorted(set(map(str, entry)) - {"prompt", "completion", "request"} - _IGNORED)
    if unknown:
        raise ConfigError(f"{where}: unknown price {unknown[0]!r}; {_FIX} (request: optional)")
    missing = [name for name in ("prompt", "completion") if name not in entry]
    if missing:
        raise ConfigError(f"{where}: no {missing[0]} price; {_FIX}")
    return Pricing(
        _usd(entry["prompt"], f"{where} prompt"),
        _usd(entry["completion"], f"{where} completion"),
        _usd(entry.get("request") or 0, f"{where} request"),
    )


# What /models also prices, which a chat call never pays: read and left aside.
_IGNORED = {"image", "web_search", "internal_reasoning", "input_cache_read", "input_cache_write", "audio"}


def _usd(value: Any, where: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise ConfigError(
            f"{where}: {value!r} is not a price in USD per token (a number >= 0, e.g. 0.0000006)"
        )
    return number
