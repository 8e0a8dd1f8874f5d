"""The version of rwb (one place; ``retrieval.__version__`` re-exports it)."""

__version__ = "0.1.0"
