"""The shared rule modules (the validator collects them with each skeleton's own)."""
