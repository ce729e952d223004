"""Model-based quality scoring: train a fastText classifier, score documents with it in stage 1.

    # from labeled JSONL files (one document per line, a `text` field; `component` or `url` name its group)
    .venv/bin/python -m minideepseek.quality train --positives good.jsonl --negatives bad.jsonl --out models/q
    # from a run's stage-1 documents, labeled by a rule in a small YAML (see docs/stages.md)
    .venv/bin/python -m minideepseek.quality train --config configs/quality/demo_classifier.yaml

then in a source's filter chain: ``{type: quality, model: models/q/model.bin, label: hq, threshold: 0.5}``
(or ``top_fraction: 0.1``, DCLM's rule). Modules: :mod:`.data` (config, labeled documents, the split by
component), :mod:`.train` (training, card, report), :mod:`.model` (loading and scoring, shared with the
filter), :mod:`.metrics` (AUC, P/R/F1, calibration).
"""
