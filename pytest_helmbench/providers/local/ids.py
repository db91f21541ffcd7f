"""What the local provider's modules share: its model ids, its install hint and its error type.

Kept apart so that the provider (`__init__`), weights.py and server.py import it without
importing each other.
"""

from __future__ import annotations

from ...errors import HelmbenchError

LOCAL_PREFIX = "local/"
INSTALL_HINT = "pip install 'pytest-helmbench[local]'  (or: pip install xllamacpp)"


class LocalProviderError(HelmbenchError):
    """A problem of the local provider the user can fix (missing package, missing weights, failed start)."""


def is_local_model(model_id: str) -> bool:
    """True for ids served by the embedded local provider (``local/...``)."""
    return model_id.startswith(LOCAL_PREFIX) and len(model_id) > len(LOCAL_PREFIX)
