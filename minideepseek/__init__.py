"""Mini-DeepSeek: a reproducible, scaled-down DeepSeek-V3-style pretraining data pipeline."""

__version__ = "0.1.0"
