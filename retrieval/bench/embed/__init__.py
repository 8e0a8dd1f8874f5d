"""Embedding throughput benchmark: one-at-a-time calls vs batching strategies, on real text.

Settings measured on the same texts, in one process (so the ratios are comparable even when the
machine is noisy; the absolute figures are not):

- ``single``: one forward call per text (batch size 1) - the baseline of ``speedup``;
- ``batch-<b>``: batches of ``b`` texts in the order they arrive (padding to the longest);
- ``sorted-<b>``: the same after sorting the texts by token length (length bucketing);
- ``tokens-<n>``: length-sorted batches filled until ``n`` *padded* tokens (the batch's longest
  text times its size) would be exceeded - large batches of short texts, small of long ones;
- ``library-<b>``: the library's own ``encode(batch_size=b)`` (sentence-transformers sorts by
  character length internally; FlagEmbedding by token length) - the baseline a user gets today;
- each fp32 winner again with bf16 weights (``dtype`` bf16) where the CPU has bf16 instructions.

Per setting: texts/s, tokens/s (real tokens, after truncation to the model's limit), per-call
latency p50/p95 in **milliseconds** (a call is one batch: the latency a request waits when its
texts travel in that batch), padding waste (pad tokens / all tokens fed to the model, measured
from the attention masks), and the max absolute difference of every embedding component from
the one-at-a-time embedding of the same text (the check fails above ``tolerance``).

bf16 drift is reported as cosine distance ``1 - cos(fp32, bf16)`` per text (mean and max) and as
recall@10 of exact search with bf16 vectors against exact search with fp32 vectors (queries: the
first ``drift_queries`` texts of the sample; corpus: the rest).

Roles: :mod:`.spec` (the config and its loader), :mod:`.plan` (batching plans, merging,
agreement and drift checks: pure), :mod:`.texts` (the texts measured), :mod:`.engines` (live model
calls, timed through :mod:`retrieval.timing`), :mod:`.run` (the bench and its run directory).
"""
