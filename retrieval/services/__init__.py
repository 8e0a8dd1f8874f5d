"""Local services rwb can start for tests and benchmarks (a Redis 8 server with vector search)."""
