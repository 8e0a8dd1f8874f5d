"""One folder per engine. Each sub-package registers ONE
:class:`~retrieval.indexes.engine.EngineDescriptor` (and its backends) when imported;
:func:`retrieval.indexes.engine.discover` imports them all, then third-party engines from the
``rwb.engines`` entry point. Nothing outside this package names an engine."""
