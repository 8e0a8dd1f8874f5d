"""The steps of a Milvus build that are plain RPCs and checks: the collection schema, the index
params (nested, ``params={"params": {...}}``: flat params are silently dropped by Milvus Lite),
waiting until every row is indexed, and reading the index back to check the params took effect.
Not a backend module (the backend is :mod:`retrieval.engines.milvus.index`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from retrieval.engines.milvus.common import PK, VEC, WHERE
from retrieval.engines.milvus.params import MilvusBuild
from retrieval.errors import BackendError


def collection_schema(client: Any, dim: int) -> Any:
    """An int64 primary key and one float vector field of ``dim``; no dynamic fields; rwb's
    mark as the description."""
    from pymilvus import DataType

    from retrieval.engines.milvus.owned import MILVUS_MARK

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False,
                                  description=MILVUS_MARK)
    schema.add_field(PK, DataType.INT64, is_primary=True)
    schema.add_field(VEC, DataType.FLOAT_VECTOR, dim=dim)
    return schema


def vector_index_params(client: Any, kind: MilvusBuild, metric_type: str) -> Any:
    """The index on the vector field, build params nested so that Milvus Lite keeps them."""
    index_params = client.prepare_index_params()
    index_params.add_index(
        field_name=VEC, index_type=kind.index_type, index_name=VEC,
        metric_type=metric_type, params={"params": kind.milvus_params()},
    )
    return index_params


def wait_indexed(describe: Callable[[], Any], n: int, timeout_s: float,
                 where: str) -> dict[str, Any]:
    """Poll ``describe()`` (describe_index) until every row is indexed (a server builds in the
    background; Milvus Lite answers Finished at once, its build happens at load)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        info = describe() or {}
        state = str(info.get("state", ""))
        if state.endswith("Failed"):
            raise BackendError(
                f"{WHERE}: index build failed on {where}: "
                f"{info.get('index_state_fail_reason', '')}"
            )
        indexed = int(info.get("indexed_rows", 0) or 0)
        pending = int(info.get("pending_index_rows", 0) or 0)
        if state.endswith("Finished") and indexed >= n and pending == 0:
            return dict(info)
        if time.monotonic() > deadline:
            raise BackendError(
                f"{WHERE}: index not built after {timeout_s:g} s on "
                f"{where} (state {state}, {indexed}/{n} rows indexed)"
            )
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def check_index_params(info: dict[str, Any], kind: MilvusBuild, metric_type: str,
                       where: str) -> None:
    """BackendError unless the described index has the type, metric and every build param
    that was sent."""
    got_type = str(info.get("index_type", ""))
    sent = kind.milvus_params()
    got = info.get("params") or {}
    if isinstance(got, str):
        got = json.loads(got)
    mismatch = {
        k: (v, got.get(k)) for k, v in sent.items() if str(got.get(k)) != str(v)
    }
    if got_type != kind.index_type or mismatch:
        raise BackendError(
            f"{WHERE}: index params did not take effect on {where}: sent "
            f"index_type {kind.index_type} {sent}; Milvus reports index_type {got_type} "
            f"{got} (mismatched: {mismatch})"
        )
    if str(info.get("metric_type", "")) != metric_type:
        raise BackendError(
            f"{WHERE}: metric did not take effect on {where}: sent "
            f"{metric_type}, Milvus reports {info.get('metric_type')}"
        )


__all__ = ["check_index_params", "collection_schema", "vector_index_params", "wait_indexed"]
