"""Model-based quality scoring, the command-line client: train a fastText classifier, build the ones a
pipeline config's filters name, rebuild a run's quality report.

    # from labeled JSONL files (one document per line, a `text` field; `component` or `url` name its group)
    .venv/bin/python -m minideepseek.quality train --positives good.jsonl --negatives bad.jsonl --out models/q
    # what stage 1 does first for a filter with train: (the demo's web source)
    .venv/bin/python -m minideepseek.quality build --config configs/demo.yaml

then in a source's filter chain: ``{type: quality, model: models/q/model.bin, label: hq, threshold: 0.5}``
(or ``top_fraction: 0.1``, DCLM's rule; ``train: T.yaml`` to have stage 1 build it). The training code is
the shared floor :mod:`minideepseek.classifier`; scoring is :mod:`minideepseek.filters.fasttext_model`;
the stage-1 build :mod:`minideepseek.sampling.quality_build`; the report
:mod:`minideepseek.sampling.quality_report`.
"""
