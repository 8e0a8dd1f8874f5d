"""verify's latency line names the cause when the engine differs (issue 25 item 8)."""

import retrieval.engines  # noqa: F401  (registers the engine descriptors)
from retrieval.cli.cmd_export import latency_cause


def test_latency_line_says_when_the_difference_is_the_engine():
    assert latency_cause("hnswlib", "hnswlib") == "latency depends on the machine"
    text = latency_cause("hnswlib", "redis")
    assert "recorded on hnswlib (in-process)" in text
    assert "measured now on redis (a server over a socket)" in text
