"""Settings package: base (shared), local (one-machine default), production, test."""
