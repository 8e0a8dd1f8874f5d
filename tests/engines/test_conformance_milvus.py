"""The shared conformance suite against the milvus backend (real Milvus Lite, HNSW and IVF).

The suite reads class attributes (``monotone_knobs``, ``SearchParams``); for milvus they depend
on the index type, so the suite looks at ``MilvusIndex.specialized(build)``: the same backend
class with the knobs of that build. Indexes are still made by ``create_index("milvus", ...)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

pytest.importorskip("pymilvus", reason="pymilvus not installed (extra 'milvus')")
pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")

from retrieval.engines.milvus.index import MilvusIndex
from retrieval.testing.conformance import (
    BackendConformance,
    Conformance,
    ConformanceCase,
)

pytestmark = pytest.mark.milvus


class _MilvusConformance(BackendConformance):
    @classmethod
    def suite(cls) -> Conformance:
        suite = super().suite()
        suite.cls = MilvusIndex.specialized(suite.build_params)
        return suite

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _workdir(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
        """Milvus Lite data under pytest's tmp (one sub-folder per index)."""
        original = cls.case
        cls.case = dataclasses.replace(original, workdir=tmp_path_factory.mktemp(original.id))
        yield
        cls.case = original


class TestMilvusHnswConformance(_MilvusConformance):
    case = ConformanceCase("milvus", build={"index_type": "HNSW", "M": 16,
                                            "efConstruction": 200}, label="milvus-hnsw")


class TestMilvusIvfConformance(_MilvusConformance):
    case = ConformanceCase("milvus", metric="cosine",
                           build={"index_type": "IVF_FLAT", "nlist": 32}, label="milvus-ivf")


def test_registered_class_declares_every_knob() -> None:
    assert MilvusIndex.monotone_knobs == ("ef", "nprobe")
    hnsw = MilvusIndex.specialized(MilvusIndex.BuildParams.model_validate({}))
    assert hnsw.monotone_knobs == ("ef",) and hnsw.family == "hnsw" and hnsw.name == "milvus"
    ivf = MilvusIndex.specialized(
        MilvusIndex.BuildParams.model_validate({"index_type": "IVF_SQ8", "nlist": 8})
    )
    assert ivf.monotone_knobs == ("nprobe",) and ivf.family == "ivf"
    assert issubclass(ivf, MilvusIndex)
