"""Dataset loaders: vector files, text collections, the synthetic generator and the catalog."""
