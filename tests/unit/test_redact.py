"""No secret is ever written: URI credentials, sensitive keys, secret environment values."""

from retrieval.redact import is_sensitive, mask, redact_text, redact_uri, scrub


def test_uri_credentials_and_sensitive_query_values_are_masked():
    out = redact_uri("postgresql://bob:hunter2@db.example:5432/rwb?sslmode=require&password=pw9")
    assert "hunter2" not in out and "bob" not in out and "pw9" not in out
    assert out.startswith("postgresql://***@db.example:5432/rwb") and "sslmode=require" in out
    assert redact_uri("sqlite:////tmp/x/study.db") == "sqlite:////tmp/x/study.db"
    assert redact_uri("plain text") == "plain text"


def test_sensitive_names():
    for name in ("password", "auth_token", "apiKey", "RWB_MILVUS_TOKEN", "api_key", "secret"):
        assert is_sensitive(name), name
    for name in ("tokenizers", "index_type", "M", "ef_search", "keyword"):
        assert not is_sensitive(name), name


def test_scrub_drops_keys_masks_uris_and_known_secrets():
    doc = {
        "token": "abc",
        "nested": [{"password": "x", "uri": "redis://:hunter2@h:6379/0", "note": "key=s3cr3tv"}],
        "ok": 1,
    }
    out = scrub(doc, secrets=["s3cr3tv"])
    text = repr(out)
    assert "abc" not in text and "hunter2" not in text and "s3cr3tv" not in text
    assert out["ok"] == 1 and "token" not in out and "password" not in out["nested"][0]


def test_secret_environment_values_are_masked(monkeypatch):
    monkeypatch.setenv("RWB_MILVUS_TOKEN", "tok-very-secret")
    assert "tok-very-secret" not in redact_text("connect with tok-very-secret now")


def test_a_processing_pass_is_not_a_password():
    """``pass`` is a credential in ``PASS`` / ``DB_PASS``, not in ``quality_pass`` (a summary key
    of the rerank and study runs, which must be recorded as written)."""
    assert is_sensitive("pass") and is_sensitive("DB_PASS") and is_sensitive("redis_pass")
    assert not is_sensitive("quality_pass") and not is_sensitive("first_pass")
    assert mask({"quality_pass": "stored vectors looked up"}) == {
        "quality_pass": "stored vectors looked up"}
