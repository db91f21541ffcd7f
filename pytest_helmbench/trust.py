"""Where keys and prompts may go: the key's source and shape, loopback, plain http.

The trust boundary's network side (docs/explanation/security.md): OPENROUTER_API_KEY goes only to OpenRouter's
default URL or a base URL the user gave on the command line or in the environment; a key is held in a
`Secret` and checked for pasted whitespace or invisible characters; plain http:// leaves the machine
only with --helmbench-allow-insecure.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit

from .errors import ConfigError
from .redaction import Secret, redact

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
KEY_ENV = "OPENROUTER_API_KEY"


class OptionSource(Enum):
    """Where an option's value came from: the key goes only to a base URL the user gave."""

    CLI = "command line"
    ENV = "environment"
    INI = "ini file"
    DEFAULT = "default"


class TrustError(ConfigError):
    """The run would send a key or prompts where they must not go, or the key is malformed: the session
    stops once, before any call, with this one line (never the key)."""


@dataclass(frozen=True)
class Credential:
    """The key a model's calls carry and the environment variable it came from (empty: not set)."""

    env: str
    key: Secret


def is_openrouter(url: str | None) -> bool:
    """No base URL of its own, or OpenRouter's default one."""
    return url is None or str(url).strip().rstrip("/") == OPENROUTER_BASE_URL


def is_loopback(url: str) -> bool:
    """True for localhost, *.localhost, 127.0.0.0/8 and ::1: traffic that never leaves the machine."""
    host = (urlsplit(url.strip()).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_transport(url: str, where: str, allow_insecure: bool) -> None:
    """Plain http:// only to loopback, unless --helmbench-allow-insecure: prompts and keys are not sent
    readable by anyone on the way."""
    if allow_insecure or not url.strip().lower().startswith("http://") or is_loopback(url):
        return
    raise TrustError(
        f"{where}: {redact(url)} is plain http:// to a host other than loopback, refused (prompts and any "
        "key would travel unencrypted); use https://, or pass --helmbench-allow-insecure"
    )


def check_key(value: str, name: str) -> Secret:
    """A key as the provider expects it: printable ASCII, no whitespace. The error never shows the key."""
    for position, char in enumerate(value, 1):
        if char.isspace() or not (char.isascii() and char.isprintable()):
            what = "whitespace" if char.isspace() else "a non-ASCII or invisible character"
            raise TrustError(
                f"{name} contains {what} (U+{ord(char):04X}) at character {position}, e.g. pasted with it: "
                "set it again with the key alone"
            )
    return Secret(value)
