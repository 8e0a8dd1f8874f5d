"""Plot titles name a config in words (``faiss-ivf nlist=64 nprobe=2``), never a dict repr."""

from __future__ import annotations

import retrieval


def test_config_label_and_per_query_title_have_no_dict_repr() -> None:
    point = {"label": "faiss-ivf", "backend": "faiss-ivf", "build": {"nlist": 64},
             "search": {"nprobe": 2}}
    label = retrieval.plots.config_label(point)
    assert label == "faiss-ivf nlist=64 nprobe=2"
    fig = retrieval.plots.per_query_recall([1.0, 0.9, 0.8], k=10, config=point)
    title = fig.axes[0].get_title()
    assert "nprobe=2" in title and "{" not in title and "'" not in title
    assert retrieval.plots.config_label({"backend": "faiss-flat"}) == "faiss-flat"
