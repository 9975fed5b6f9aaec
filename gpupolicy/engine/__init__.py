"""The engine: `evaluate()` runs a rule plan over a bundle and makes every finding; suppressions,
baselines and "unknown" findings are passes over those findings. Knows no individual rule."""
