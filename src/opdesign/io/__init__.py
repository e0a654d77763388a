"""Reading and writing: safe reads, staged publish, YAML loading, streams, data paths, limits."""
