"""PostgreSQL + pgvector in its own names: ``CREATE INDEX`` SQL, the ``SET`` lines and the query,
plus the same settings as structured fields; and the way back (:func:`from_pgvector`), so a file
can be rebuilt and re-measured on pgvector from what it says.

HNSW (``USING hnsw ... WITH (m, ef_construction)``, search ``SET hnsw.ef_search``) and IVFFlat
(``USING ivfflat ... WITH (lists)``, search ``SET ivfflat.probes``) on the ``vector`` type, with
pgvector's limits (:mod:`retrieval.engines.pgvector.params`). Operators and distances: rwb
``l2`` = ``vector_l2_ops`` / ``<->`` (Euclidean; rwb reports its square, the ranking is the
same), ``ip`` = ``vector_ip_ops`` / ``<#>`` (negative inner product, as rwb), ``cosine`` =
``vector_cosine_ops`` / ``<=>`` (``1 - cos``, as rwb). The table and column names in the SQL
(``items``, ``embedding``) are placeholders for yours.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval.engines.pgvector.params import (
    BIT_OPS,
    HALF_OPS,
    OPERATOR,
    OPS,
    PgHnswBuild,
    PgHnswSearch,
    PgIvfBuild,
    PgIvfSearch,
    check_dim,
    check_hnsw_build,
    check_hnsw_search,
    check_ivf_search,
    check_oversample,
    opclass,
    query_expr,
    rerank_sql,
    vector_expr,
)
from retrieval.errors import ConfigError, param_error
from retrieval.indexes.portable import Hnsw, Ivf, Portable, Rebuilt, dim_is
from retrieval.params import validate_params

ENGINE = "pgvector"
WHERE = "pgvector export"
TABLE, COLUMN = "items", "embedding"
#: rwb backend that runs each pgvector index method
BACKENDS = {"hnsw": "pgvector", "ivfflat": "pgvector-ivfflat"}
_METRIC_OF_OPS = {v: k for k, v in OPS.items()}
_METRIC_OF_HALF_OPS = {v: k for k, v in HALF_OPS.items()}


def _cannot(p: Portable, why: str) -> ConfigError:
    return ConfigError(f"engine '{ENGINE}' cannot express this config ({type(p).__name__}): {why}")


def _sql(method: str, metric: str, with_: Mapping[str, int], sets: Mapping[str, int],
         k: int, vector_type: str = "vector", dim: int = 0, oversample: int = 1
         ) -> dict[str, Any]:
    """The SQL of a config; ``halfvec``: an expression index over ``embedding::halfvec(dim)``
    and the query ordered by the same expression (the table keeps its float32 column);
    ``bit``: an expression index over ``binary_quantize(embedding)::bit(dim)`` and the re-rank
    query (``k * oversample`` Hamming candidates re-ranked by the float32 column)."""
    args = ", ".join(f"{key} = {int(v)}" for key, v in with_.items())
    col = vector_expr(vector_type, dim, COLUMN)
    q = query_expr(vector_type, dim, "$1")
    query = (f"{rerank_sql(TABLE, dim, metric, '$1', str(k * oversample), str(k), COLUMN)};"
             .replace(f"SELECT id, {COLUMN} {OPERATOR[metric]} $1 FROM", "SELECT id FROM", 1)
             if vector_type == "bit" else
             f"SELECT id FROM {TABLE} ORDER BY {col} {OPERATOR[metric]} {q} LIMIT {k};")
    return {
        "create_index": f"CREATE INDEX ON {TABLE} USING {method} "
                        f"({col} {opclass(vector_type, metric)}) WITH ({args});",
        "set": [f"SET {key} = {int(v)};" for key, v in sets.items()],
        "query": query,
    }


def with_set_local(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``set_local``: its ``set`` lines as ``SET LOCAL`` in one transaction with
    its ``query``."""
    lines = [str(x).replace("SET ", "SET LOCAL ", 1) for x in doc["set"]]
    return {**doc, "set_local": {"note": SET_LOCAL_NOTE,
                                 "sql": ["BEGIN;", *lines, doc["query"], "COMMIT;"]}}


#: why a pooled connection wants ``SET LOCAL`` (a session ``SET`` leaks to the pool's next user)
SET_LOCAL_NOTE = ("for pooled connections (PgBouncer transaction mode, a client pool): SET LOCAL "
                  "lasts until COMMIT, so the setting never leaks to the next borrower")


def to_pgvector(p: Portable, metric: str, dim: int, k: int) -> dict[str, Any]:
    """The pgvector config of ``p``: SQL (``create_index``, ``set``, ``query``) and the same
    settings as fields (``method``, ``opclass``, ``operator``, ``dim``, ``build_params``,
    ``search_params``). ConfigError (one line) for what pgvector cannot take."""
    if metric not in OPS:
        raise param_error("metric", f"one of {', '.join(OPS)}", metric, where=WHERE)
    check_dim(dim, WHERE)
    vtype, oversample = "vector", 1
    if isinstance(p, Hnsw):
        if p.quantization not in (None, "FP16", "BQ"):
            raise _cannot(p, f"HNSW over {p.quantization} has no pgvector form (halfvec is "
                          "FP16, bit with a re-rank query is BQ; no SQ8 / PQ)")
        vtype = {"FP16": "halfvec", "BQ": "bit"}.get(str(p.quantization), "vector")
        method = "hnsw"
        build = validate_params(PgHnswBuild, {"m": p.M, "ef_construction": p.ef_construction,
                                              "vector_type": vtype},
                                where=WHERE, prefix="build_params.")
        check_hnsw_build(build, WHERE)
        given: dict[str, Any] = {"ef_search": p.ef_search}
        if vtype == "bit":  # pgvector's own re-rank depth when it came from pgvector, else 1
            given["oversample"] = p.native_for(ENGINE).get("oversample") or 1
        search = validate_params(PgHnswSearch, given, where=WHERE, prefix="search_params.")
        check_hnsw_search(search, k, WHERE)
        check_oversample(build, search, WHERE)
        with_ = build.model_dump(exclude={"vector_type"})
        sets = {"hnsw.ef_search": search.ef_search}
        sp: dict[str, Any] = {"ef_search": search.ef_search}
        if search.oversample is not None:
            oversample = search.oversample
            sp["oversample"] = oversample
    elif isinstance(p, Ivf):
        if p.encoding != "flat" or p.refine:
            raise _cannot(p, "pgvector's IVFFlat stores exact vectors (no SQ8/PQ, no refine)")
        method = "ivfflat"
        ivf = validate_params(PgIvfBuild, {"lists": p.nlist}, where=WHERE,
                              prefix="build_params.")
        probes = validate_params(PgIvfSearch, {"probes": p.nprobe}, where=WHERE,
                                 prefix="search_params.")
        check_ivf_search(ivf, probes, WHERE)
        with_, sets = ivf.model_dump(), {"ivfflat.probes": probes.probes}
        sp = {"probes": probes.probes}
    else:
        raise _cannot(p, "rwb measures pgvector's HNSW and IVFFlat indexes only (no index is "
                      "a sequential scan, AUTOINDEX is Milvus's)")
    return with_set_local({
        "method": method,
        "opclass": opclass(vtype, metric),
        "operator": OPERATOR[metric],
        "dim": dim,
        **({"vector_type": vtype} if vtype != "vector" else {}),
        "build_params": with_,
        "search_params": sp,
        **_sql(method, metric, with_, sets, k, vtype, dim, oversample),
    })


@dataclass(frozen=True)
class PgvectorConfig:
    """What a pgvector config file says, read back: the rwb ``backend`` that runs it, its
    ``build`` / ``search`` params (rwb's pgvector names), the neutral form, metric and dim."""

    backend: str
    build: dict[str, Any]
    search: dict[str, Any]
    portable: Portable
    metric: str
    dim: int


_CREATE = re.compile(
    r"CREATE\s+INDEX\b.*?\bUSING\s+(?P<method>\w+)\s*\(\s*"
    r"(?:\w+|\(\s*\w+\s*::\s*halfvec\s*\(\s*(?P<hdim>\d+)\s*\)\s*\)"
    r"|\(\s*binary_quantize\s*\(\s*\w+\s*\)\s*::\s*bit\s*\(\s*(?P<bdim>\d+)\s*\)\s*\))"
    r"\s+(?P<ops>\w+)\s*\)"
    r"\s*(?:WITH\s*\((?P<with>[^)]*)\))?", re.IGNORECASE | re.DOTALL)
#: the re-rank query of a bit index: inner LIMIT (k * oversample), the metric's operator, LIMIT k
_RERANK = re.compile(
    r"\bORDER\s+BY\s+\(?\s*binary_quantize\s*\(\s*\w+\s*\)\s*::\s*bit\s*\(\s*\d+\s*\)\s*\)?"
    r"\s*<~>.*?\bLIMIT\s+(?P<inner>\d+)\s*\)\s*\w*\s*ORDER\s+BY\s+\w+\s*(?P<op><->|<#>|<=>)"
    r"\s*\$1\s+LIMIT\s+(?P<limit>\d+)", re.IGNORECASE | re.DOTALL)
_SET = re.compile(r"^\s*SET\s+(?P<name>[\w.]+)\s*(?:=|TO)\s*'?(?P<value>[\w.]+)'?\s*;?\s*$",
                  re.IGNORECASE)


def _need(doc: Mapping[str, Any], key: str) -> Any:
    if key not in doc or doc[key] is None:
        raise ConfigError(f"{WHERE}: field 'config.{key}' is missing")
    return doc[key]


def _int(value: str, field: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise param_error(field, "an integer", value, where=WHERE) from None


def _parse_create(sql: str) -> tuple[str, str, dict[str, int]]:
    m = _CREATE.search(sql)
    if m is None:
        raise ConfigError(f"{WHERE}: field 'config.create_index' is not a CREATE INDEX ... USING "
                          f"hnsw|ivfflat (embedding OPCLASS) WITH (...) statement; received "
                          f"{sql[:120]!r}")
    with_: dict[str, int] = {}
    for part in filter(None, (s.strip() for s in (m.group("with") or "").split(","))):
        key, _, value = part.partition("=")
        with_[key.strip().lower()] = _int(value.strip(), f"config.create_index WITH {key.strip()}")
    return m.group("method").lower(), m.group("ops").lower(), with_


#: the iterative-scan SET lines a filtered operating point carries (issue 13)
_SCAN_SETS = ("hnsw.iterative_scan", "hnsw.max_scan_tuples")


def _parse_sets(lines: Any) -> dict[str, str]:
    if not isinstance(lines, list):
        raise param_error("config.set", "a list of SET statements", lines, where=WHERE)
    out: dict[str, str] = {}
    for line in lines:
        m = _SET.match(str(line))
        if m is None:
            raise param_error("config.set", "SET name = value; lines", line, where=WHERE)
        out[m.group("name").lower()] = m.group("value")
    return out


def _agree(field: str, sql_value: Any, stated: Any) -> None:
    if sql_value != stated:
        raise ConfigError(f"{WHERE}: field 'config.{field}' ({stated!r}) disagrees with the SQL "
                          f"in the same file ({sql_value!r}); one of them was edited")


def from_pgvector(doc: Mapping[str, Any], k: int | None = None) -> PgvectorConfig:
    """Read a config written by :func:`to_pgvector` back from its SQL (``create_index`` and the
    ``set`` lines, what a user runs), checked against its structured fields and pgvector's limits
    (with ``k``: ef_search >= k). ConfigError naming the field for anything edited out of shape."""
    create_sql = str(_need(doc, "create_index"))
    method, ops, with_ = _parse_create(create_sql)
    if method not in BACKENDS:
        raise param_error("config.create_index USING", "hnsw or ivfflat", method, where=WHERE)
    half = ops in _METRIC_OF_HALF_OPS and method == "hnsw"
    bit = ops == BIT_OPS and method == "hnsw"
    if ops not in _METRIC_OF_OPS and not half and not bit:
        allowed = ", ".join([*OPS.values(), *HALF_OPS.values(), BIT_OPS])
        raise param_error("config.create_index operator class", f"one of {allowed} (halfvec "
                          "and bit with hnsw only)", ops, where=WHERE)
    oversample: int | None = None
    if bit:
        metric, oversample = _rerank(doc, k)
    else:
        metric = (_METRIC_OF_HALF_OPS if half else _METRIC_OF_OPS)[ops]
    sets = _parse_sets(_need(doc, "set"))
    dim = _need(doc, "dim")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise param_error("config.dim", "an integer >= 1", dim, where=WHERE)
    check_dim(dim, WHERE)
    m = _CREATE.search(create_sql)
    hdim = m.group("hdim") if m is not None else None
    bdim = m.group("bdim") if m is not None else None
    if (half != (hdim is not None) or (hdim is not None and int(hdim) != dim)
            or bit != (bdim is not None) or (bdim is not None and int(bdim) != dim)):
        raise param_error("config.create_index", f"a halfvec operator class on the expression "
                          f"(embedding::halfvec({dim})), bit_hamming_ops on "
                          f"(binary_quantize(embedding)::bit({dim})), or a vector one on the "
                          f"column", create_sql[:120], where=WHERE)
    vtype = "halfvec" if half else "bit" if bit else "vector"
    _agree("vector_type", vtype, doc.get("vector_type", "vector"))
    _agree("method", method, doc.get("method", method))
    _agree("opclass", ops, doc.get("opclass", ops))
    _agree("operator", OPERATOR[metric], doc.get("operator", OPERATOR[metric]))
    _agree("build_params", with_, dict(doc.get("build_params", with_)))
    if half and "::halfvec(" not in str(doc.get("query", "::halfvec(")):
        raise param_error("config.query", f"ordered by embedding::halfvec({dim}) (the indexed "
                          "expression; otherwise PostgreSQL scans the table)",
                          str(doc.get("query"))[:120], where=WHERE)
    if method == "hnsw":
        build = validate_params(PgHnswBuild, {**with_, "vector_type": vtype}, where=WHERE,
                                prefix="config.create_index.")
        check_hnsw_build(build, WHERE)
        unknown = set(sets) - {"hnsw.ef_search", *_SCAN_SETS}
        if unknown or "hnsw.ef_search" not in sets:
            raise param_error("config.set", "one line SET hnsw.ef_search = N (and, for a "
                              "filtered point, hnsw.iterative_scan / hnsw.max_scan_tuples)",
                              sorted(sets), where=WHERE)
        given: dict[str, Any] = {"ef_search": _int(sets["hnsw.ef_search"], "config.set")}
        if "hnsw.iterative_scan" in sets:
            given["iterative_scan"] = sets["hnsw.iterative_scan"]
        if "hnsw.max_scan_tuples" in sets:
            given["max_scan_tuples"] = _int(sets["hnsw.max_scan_tuples"], "config.set")
        search = validate_params(PgHnswSearch, given, where=WHERE, prefix="config.set.hnsw.")
        if k is not None:
            check_hnsw_search(search, k, WHERE)
        sp: dict[str, Any] = {"ef_search": search.ef_search}
        if search.iterative_scan != "off":  # a filtered operating point's own scan
            sp.update(iterative_scan=search.iterative_scan,
                      max_scan_tuples=search.max_scan_tuples)
        if oversample is not None:
            sp["oversample"] = oversample
        portable: Portable = (
            Hnsw(build.m, build.ef_construction, search.ef_search, "BQ", native_engine=ENGINE,
                 native=(("oversample", oversample or 1),)) if bit else
            Hnsw(build.m, build.ef_construction, search.ef_search, "FP16" if half else None))
    else:
        ivf = validate_params(PgIvfBuild, with_, where=WHERE, prefix="config.create_index.")
        if set(sets) != {"ivfflat.probes"}:
            raise param_error("config.set", "exactly one line SET ivfflat.probes = N",
                              sorted(sets), where=WHERE)
        probes = validate_params(PgIvfSearch,
                                 {"probes": _int(sets["ivfflat.probes"], "config.set")},
                                 where=WHERE, prefix="config.set.ivfflat.")
        check_ivf_search(ivf, probes, WHERE)
        sp = {"probes": probes.probes}
        build_dump = ivf.model_dump()
        portable = Ivf(ivf.lists, probes.probes)
        _agree("search_params", sp, dict(doc.get("search_params", sp)))
        return PgvectorConfig(BACKENDS[method], build_dump, sp, portable, metric, dim)
    _agree("search_params", sp, dict(doc.get("search_params", sp)))
    build_doc = build.model_dump(exclude=set() if half or bit else {"vector_type"})
    return PgvectorConfig(BACKENDS[method], build_doc, sp, portable, metric, dim)


def _rerank(doc: Mapping[str, Any], k: int | None) -> tuple[str, int]:
    """The metric and oversample of a ``bit`` config, read from its re-rank query (the SQL a
    user runs): ``LIMIT k * oversample`` on the binary index, then ``ORDER BY embedding <op> $1
    LIMIT k`` on the float32 column."""
    query = str(_need(doc, "query"))
    m = _RERANK.search(query)
    if m is None:
        raise param_error("config.query", "the re-rank query of a bit index (SELECT id FROM "
                          "(SELECT ... ORDER BY binary_quantize(embedding)::bit(dim) <~> "
                          "binary_quantize($1...) LIMIT k * oversample) c ORDER BY embedding "
                          "<op> $1 LIMIT k)", query[:160], where=WHERE)
    inner, limit = int(m.group("inner")), int(m.group("limit"))
    if k is not None and limit != k:
        raise param_error("config.query LIMIT", f"k ({k}, the evidence's)", limit, where=WHERE)
    if limit < 1 or inner < limit or inner % limit:
        raise param_error("config.query inner LIMIT", f"a multiple >= 1 of the outer LIMIT "
                          f"({limit}): k * oversample", inner, where=WHERE)
    metric = {op: name for name, op in OPERATOR.items()}[m.group("op")]
    return metric, inner // limit


__all__ = ["BACKENDS", "ENGINE", "PgvectorConfig", "from_pgvector", "to_pgvector"]


def from_native(cfg: Mapping[str, Any], metric: str, dim: int, k: int, where: str) -> Rebuilt:
    """pgvector: the SQL read back by :func:`from_pgvector`
    (``create_index`` + ``set`` lines, checked against the structured fields and pgvector's
    limits), then checked against the data's metric and dimension."""
    c = from_pgvector(cfg, k)
    check_set_local(cfg)
    if c.metric != metric:
        raise param_error("config.create_index operator class",
                          f"'{OPS.get(metric, metric)}' (the data's metric is {metric})",
                          OPS.get(c.metric, c.metric), where=where)
    dim_is(c.dim, dim, "dim", where)
    return Rebuilt(c.backend, dict(c.build), dict(c.search))


def check_set_local(doc: Mapping[str, Any]) -> None:
    """``set_local`` (when present: files written before it existed still verify) must say what
    the ``set`` lines and the ``query`` say."""
    if doc.get("set_local") is None:
        return
    want = with_set_local({"set": list(doc["set"]), "query": doc["query"]})["set_local"]["sql"]
    got = doc["set_local"].get("sql") if isinstance(doc["set_local"], Mapping) else None
    if not isinstance(got, list) or [" ".join(str(x).split()) for x in got] != want:
        raise param_error("config.set_local.sql", f"{want} (the set lines and the query as SET "
                          f"LOCAL in one transaction)", got, where=WHERE)


to_native = to_pgvector


def filter_knobs(search: dict[str, Any], given: Mapping[str, Any]) -> Any:
    """A pgvector HNSW iterative scan (no neutral form), carried as ``SET`` lines and in
    ``search_params`` when a filtered point measured on pgvector is exported to pgvector."""
    if search.get("iterative_scan", "off") == "off":
        return None
    scan = {"iterative_scan": search["iterative_scan"],
            "max_scan_tuples": int(search.get("max_scan_tuples", 20000))}
    search["iterative_scan"] = "off"

    def apply(native: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        native["search_params"].update(scan)
        native["set"] += [f"SET hnsw.{key} = {val};" for key, val in scan.items()]
        return with_set_local(native), {}

    return apply
