"""pgvector's native segments (:class:`~retrieval.indexes.base.SupportsNativeSegments`): the
table declared ``PARTITION BY HASH (id)`` into N partitions, and the vector index created on
the partitioned table, so PostgreSQL builds one index (one HNSW graph, one IVFFlat list set) per
partition. A k-NN query then scans every partition's index (a ``Merge Append`` of N ``Index
Scan`` nodes, each ordered by distance, with ``hnsw.ef_search`` applying to each) and merges
them by distance: what a partitioned production table searches. One partition (the default) is
the plain table. The plan check accepts only a plan that scans the index of every partition.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from retrieval.errors import BackendError, ConfigError
from retrieval.indexes.base import MaintainInfo

#: PostgreSQL accepts any modulus, but one partition per segment is a table each: keep it sane
MAX_PARTITIONS = 1024


def tree_sql(param: str) -> str:
    """A FROM item of the relation ``param`` names (a SQL parameter) and all its partitions
    (column ``relid``): a plain relation alone, a partitioned one with every partition (the
    parent itself stores 0 bytes)."""
    return (f"(SELECT {param}::regclass AS relid UNION SELECT relid FROM "
            f"pg_partition_tree({param}::regclass)) AS tree")


class PgSegments:
    """Mixin of :class:`~retrieval.engines.pgvector.base.PgVectorIndex` (``self.table``,
    ``self._run``, ``self._where`` from it)."""

    segments_note = ("PostgreSQL hash partitions of the id, each with its own index; a query "
                     "scans every partition's index and merges them (Merge Append)")
    _partitions = 1
    table: str

    if TYPE_CHECKING:  # PgVectorIndex's
        def _run(self, what: str, sql: str, params: Any = None) -> Any: ...

        def _where(self) -> str: ...

    def set_segments(self, n: int) -> None:
        """Build the next table as ``n`` hash partitions of the id (1: a plain table)."""
        if not 1 <= int(n) <= MAX_PARTITIONS:
            raise ConfigError(f"{self._where()}: segments (partitions) must be in [1, "
                              f"{MAX_PARTITIONS}]; received {n}")
        self._partitions = int(n)

    def _partition_clause(self) -> str:
        return " PARTITION BY HASH (id)" if self._partitions > 1 else ""

    def _create_partitions(self) -> None:
        """The N partitions of a partitioned table (none for a plain one)."""
        n = self._partitions
        for r in range(n if n > 1 else 0):
            self._run("CREATE TABLE", f"CREATE TABLE {self.table}_p{r} PARTITION OF "
                      f"{self.table} FOR VALUES WITH (MODULUS {n}, REMAINDER {r})")

    def segment_count(self) -> int | None:
        """The partitions PostgreSQL reports for the table (``pg_inherits``; 1: a plain
        table)."""
        row = self._run("partitions", "SELECT count(*) FROM pg_inherits WHERE inhparent = "
                        "%(t)s::regclass", {"t": self.table}).fetchone()
        return max(1, int(row[0]))

    def merge_segments(self) -> MaintainInfo:
        """pgvector's maintenance: ``VACUUM`` then ``REINDEX TABLE`` (every partition's index
        rebuilt from its rows, timed). PostgreSQL has no merge of partitions: the count stays."""
        t0 = time.perf_counter_ns()
        self._run("VACUUM", f"VACUUM {self.table}")
        self._run("REINDEX", f"REINDEX TABLE {self.table}")
        seconds = (time.perf_counter_ns() - t0) / 1e9
        return MaintainInfo("vacuum+reindex", seconds, {
            "segments_after": self.segment_count(),
            "note": "each partition's index rebuilt; partitions are never merged"})

    def _our_index(self, name: str | None) -> bool:
        """An index this table's search may use: the table's own, or a partition's."""
        if not name:
            return False
        if self._partitions == 1:
            return name == f"{self.table}_idx"
        return name.startswith(f"{self.table}_p")

    def _check_partition_scans(self, nodes: list[dict[str, Any]]) -> None:
        """Every partition's index is scanned (else a partition would be searched exactly or
        not at all)."""
        if self._partitions == 1:
            return
        scanned = {n.get("Relation Name") for n in nodes
                   if "Index" in n.get("Node Type", "") and self._our_index(n.get("Index Name"))}
        if len(scanned) != self._partitions:
            raise BackendError(f"{self._where()}: the plan scans the vector index of "
                               f"{len(scanned)} of the {self._partitions} partitions")


__all__ = ["MAX_PARTITIONS", "PgSegments", "tree_sql"]
