"""retrieval-workbench (`rwb`): measure and tune the retrieval layer of RAG systems offline."""

__version__ = "0.1.0"
