"""Redis' own hybrid search (``FT.HYBRID``): refused here, with the reason.

``FT.HYBRID`` (a text or vector query fused by RRF or a linear combination in the server) came
with a later Redis query engine (Redis 8.4 per the clients' release notes) than the RediSearch
module rwb runs against here (search 2.10.5 loaded in Redis 8.2.3, from the PyPI wheels:
``FT.HYBRID`` answers "unknown command"). redis-py 8.1 can build the command, but no server here
can run it, so no test could load an export: rwb does not write one (it would be untested).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.errors import ConfigError
from retrieval.indexes.hybrid import HybridSearch

REFUSED = ("Redis' hybrid search FT.HYBRID needs a newer Redis query engine (8.4) than the "
           "RediSearch module rwb runs here (2.10.5 in Redis 8.2.3, where FT.HYBRID is an "
           "unknown command), so rwb writes no FT.HYBRID export it cannot test")


def _never(method: str, params: Mapping[str, Any]) -> bool:
    return False


def _form(method: str, params: Mapping[str, Any], dense_metric: str) -> dict[str, Any]:
    raise ConfigError(f"--engine redis: {REFUSED}")


HYBRID = HybridSearch(expressible=_never, form=_form, refused=REFUSED)

__all__ = ["HYBRID", "REFUSED"]
