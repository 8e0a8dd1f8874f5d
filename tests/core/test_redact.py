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


# --- issue 20: the current directory is no secret; passwords in every spelling ----------------
PLANTED = "Pl4nted#S3c/r'et"
SPELLINGS = [
    f"postgresql+psycopg://u:{PLANTED}@db.example:5432/rwb",  # SQLAlchemy: up to the first @
    f"postgresql://u:{PLANTED}@db.example/rwb",  # libpq URI
    f"http://root:{PLANTED}@milvus.example:19530",  # pymilvus / urllib
    f"redis://default:{PLANTED}@redis.example:6379/0",  # redis-py parse_url
    "host=db.example port=5432 password='Pl4nted#S3c/r\\'et' dbname=rwb",  # libpq DSN
    "host=db.example sslpassword=Pl4nted#S3c/ret dbname=rwb",
    "postgresql://u@db.example/rwb?sslmode=require&password=Pl4nted#S3c/ret",
]


def test_the_current_directory_is_not_a_secret(monkeypatch, tmp_path):
    """The shell's PWD / OLDPWD hold directories: a path under them is written as it is
    (issue 20: the cwd became *** in every run file, breaking resume and verify)."""
    monkeypatch.setenv("PWD", str(tmp_path))
    monkeypatch.setenv("OLDPWD", str(tmp_path.parent))
    monkeypatch.setenv("XDG_SESSION_CLASS", "user")  # a kind of session, not a secret
    path = f"sqlite:///{tmp_path}/user/run/study.db"
    assert mask({"storage": path, "pairs": f"{tmp_path}/mypairs.csv"}) == {
        "storage": path, "pairs": f"{tmp_path}/mypairs.csv"}
    assert redact_text(f"pairs file not found: {tmp_path}/x.csv") == (
        f"pairs file not found: {tmp_path}/x.csv")
    assert is_sensitive("pwd") and is_sensitive("DB_PWD")  # as a key it is a password


def test_compound_password_names_are_sensitive():
    for name in ("PGPASSWORD", "sslpassword", "dbPassword", "RWB_PG_PASSWD"):
        assert is_sensitive(name), name
    for name in ("OLDPWD", "pgpassfile"):
        assert not is_sensitive(name), name


def test_a_planted_password_in_every_spelling_is_masked():
    from retrieval.redact import redact_argv, redact_error, url_secrets

    for value in SPELLINGS:
        for shown in (redact_uri(value), redact_text(f"cannot connect to {value} now"),
                      " ".join(redact_argv(["rwb", "--storage", value])),
                      repr(mask({"storage": value}))):
            assert "Pl4nted" not in shown and "S3c" not in shown, (value, shown)
            assert "db.example" in shown or "milvus.example" in shown or (
                "redis.example" in shown), shown
        # a client's error that echoes a piece of the password (redis-py: "Port could not be
        # cast to integer value as 'Pl4nted'") loses it too
        err = ValueError("Port could not be cast to integer value as 'Pl4nted' (S3c/r'et)")
        assert "Pl4nted" not in redact_error(err, value), value
        assert PLANTED.replace("\\", "") in url_secrets(value) or "Pl4nted#S3c/ret" in (
            url_secrets(value)), value


def test_uris_without_credentials_are_kept():
    for uri in ("sqlite:////tmp/a@b/study.db", "http://host:8080/path", "redis://h:1/0"):
        assert redact_uri(uri) == uri


def test_one_redaction_policy_for_milvus():
    from retrieval.engines.milvus import common as _milvus_common
    from retrieval.redact import redact_uri as policy

    assert _milvus_common.redact_uri is policy


def test_an_ampersand_in_a_query_password_and_free_text_password_colon_are_masked():
    """Issue 34, tests that pin decisions 4: ``password=Pl4nt&edS3c`` printed as
    ``password=***&edS3c``; free text ``password: X`` was not masked."""
    url = "postgresql://h/db?password=Pl4nt&edS3c&sslmode=require"
    assert redact_text(url) == "postgresql://h/db?password=***&sslmode=require"
    assert "edS3c" not in redact_uri(url)
    assert redact_text("host=h password=Pl4nt&edS3c dbname=x") == "host=h password=*** dbname=x"
    assert redact_text("password: Pl4ntX3 and more") == "password: *** and more"
    kept = "field 'password': must be text; error: boom, tokenizers: 4"
    assert redact_text(kept) == kept  # a field's name and other words are not secrets
