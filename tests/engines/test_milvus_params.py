"""Milvus parameter models: every bad value is rejected before anything reaches Milvus."""

from __future__ import annotations

import pytest

from retrieval.engines.milvus.params import (
    BUILD_KINDS,
    AutoBuild,
    FlatBuild,
    HnswBuild,
    HnswSearch,
    HnswSqBuild,
    IvfFlatBuild,
    IvfSearch,
    IvfSq8Build,
    MilvusBuild,
    MilvusSearch,
    NoSearch,
    default_search,
    resolve_build,
    search_model_for,
)
from retrieval.errors import ConfigError
from retrieval.params import Params, validate_params

W = "backend 'milvus' build params"


def build(data: dict[str, object]) -> MilvusBuild:
    return validate_params(MilvusBuild, data, where=W)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({}, HnswBuild),
        ({"index_type": "HNSW", "M": 8, "efConstruction": 64}, HnswBuild),
        ({"index_type": "hnsw_sq"}, HnswSqBuild),
        ({"index_type": "IVF_FLAT", "nlist": 64}, IvfFlatBuild),
        ({"index_type": "IVF_SQ8", "nlist": 64}, IvfSq8Build),
        ({"index_type": "FLAT"}, FlatBuild),
        ({"index_type": "AUTOINDEX"}, AutoBuild),
    ],
)
def test_dispatch_on_index_type(data: dict[str, object], kind: type[MilvusBuild]) -> None:
    got = build(data)
    assert type(got) is kind
    assert got.index_type == kind.model_fields["index_type"].default


def test_milvus_params_are_the_engine_names() -> None:
    assert build({"M": 8, "efConstruction": 64}).milvus_params() == {"M": 8, "efConstruction": 64}
    assert build({"index_type": "IVF_SQ8", "nlist": 7}).milvus_params() == {"nlist": 7}
    assert build({"index_type": "HNSW_SQ"}).milvus_params()["sq_type"] == "SQ8"
    assert build({"index_type": "FLAT"}).milvus_params() == {}


@pytest.mark.parametrize(
    ("data", "needles"),
    [
        ({"M": -3}, ["'M'", ">= 2", "-3"]),  # Milvus Lite grew to 24 GB on this one
        ({"M": 4096}, ["'M'", "<= 2048"]),
        ({"efConstruction": 0}, ["'efConstruction'", ">= 1"]),
        ({"index_type": "IVF_FLAT", "nlist": 0}, ["'nlist'", ">= 1"]),
        ({"index_type": "IVF_FLAT", "nlist": 70000}, ["'nlist'", "<= 65536"]),
        ({"index_type": "IVF_SQ8", "nlist": "many"}, ["'nlist'", "integer"]),
        ({"index_type": "HNSW_SQ", "sq_type": "FP16"}, ["'sq_type'", "SQ8", "FP16"]),
    ],
)
def test_bad_values_name_field_range_and_value(data: dict[str, object], needles: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        build(data)
    msg = str(err.value)
    assert msg.startswith(W)
    for needle in needles:
        assert needle in msg, msg


def test_unknown_index_type_lists_allowed_and_suggests() -> None:
    with pytest.raises(ConfigError) as err:
        build({"index_type": "HNWS"})
    msg = str(err.value)
    assert "Did you mean 'HNSW'?" in msg
    for kind in BUILD_KINDS:
        assert kind in msg


def test_unsupported_milvus_index_type_explained() -> None:
    with pytest.raises(ConfigError) as err:
        build({"index_type": "IVF_PQ", "nlist": 64})
    msg = str(err.value)
    assert "IVF_PQ" in msg and "brute-forced" in msg and "Did you mean 'IVF_SQ8'?" in msg
    with pytest.raises(ConfigError, match="Did you mean 'FLAT'"):
        build({"index_type": "BRUTE_FORCE"})


def test_index_type_must_be_a_string() -> None:
    with pytest.raises(ConfigError, match="index_type"):
        build({"index_type": 3})


def test_param_of_another_kind_is_rejected_with_the_allowed_list() -> None:
    with pytest.raises(ConfigError) as err:
        build({"index_type": "IVF_FLAT", "M": 16})
    msg = str(err.value)
    assert "'M'" in msg and "IVF_FLAT" in msg and "nlist" in msg
    with pytest.raises(ConfigError, match="Did you mean 'efConstruction'"):
        build({"ef_construction": 100})
    with pytest.raises(ConfigError, match="'nlist'"):
        build({"index_type": "FLAT", "nlist": 8})


def test_prefix_names_the_spec_field() -> None:
    with pytest.raises(ConfigError) as err:
        validate_params(MilvusBuild, {"M": 1}, where="sweeps/x.yaml", prefix="indexes[0].build.")
    assert "sweeps/x.yaml: field 'indexes[0].build.M'" in str(err.value)


def test_nested_in_a_spec_model() -> None:
    class Spec(Params):
        build: MilvusBuild

    spec = Spec.model_validate({"build": {"index_type": "IVF_FLAT", "nlist": 32}})
    assert isinstance(spec.build, IvfFlatBuild) and spec.build.nlist == 32


def test_direct_construction() -> None:
    assert HnswBuild(M=32).M == 32
    assert type(resolve_build(MilvusBuild())) is HnswBuild
    assert type(resolve_build(None)) is HnswBuild
    with pytest.raises(Exception, match="IvfFlatBuild"):
        MilvusBuild(index_type="IVF_FLAT", nlist=3)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="milvus build model"):
        resolve_build(NoSearch())


def test_search_models_per_kind() -> None:
    assert search_model_for(HnswBuild()) is HnswSearch
    assert search_model_for(HnswSqBuild()) is HnswSearch
    assert search_model_for(IvfSq8Build()) is IvfSearch
    assert search_model_for(FlatBuild()) is NoSearch
    assert search_model_for(AutoBuild()) is NoSearch
    assert default_search(IvfFlatBuild(nlist=4)) == IvfSearch(nprobe=4)
    assert default_search(HnswBuild()) == HnswSearch(ef=64)
    with pytest.raises(ConfigError, match="'ef'"):
        validate_params(MilvusSearch, {"ef": 0})
    with pytest.raises(ConfigError, match="'ef'"):
        validate_params(MilvusSearch, {"ef": 5000})
    with pytest.raises(ConfigError, match="Did you mean 'nprobe'"):
        validate_params(MilvusSearch, {"nprob": 3})
    assert MilvusSearch(ef=32).model_dump() == {"ef": 32}  # unset knobs are not reported
    assert MilvusSearch().model_dump_json() == "{}"


def test_knob_bounds() -> None:
    assert HnswBuild().knob_bounds(10) == (10, 4096)
    assert IvfFlatBuild(nlist=50).knob_bounds(10) == (1, 50)
    assert IvfFlatBuild(nlist=50).most_accurate() == {"nprobe": 50}
    assert FlatBuild().most_accurate() == {}
    with pytest.raises(ConfigError, match="'k'"):
        HnswBuild().knob_bounds(5000)
    with pytest.raises(ConfigError, match="no search knob"):
        AutoBuild().knob_bounds(10)
