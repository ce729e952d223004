"""Training a fastText quality classifier: a shared floor, so stage 1 can build the model its ``quality``
filter names (``train:``) and the ``python -m minideepseek.quality`` client can train one by hand.
Modules: :mod:`.data` (config, labeled documents, the split by group), :mod:`.train` (training, card,
held-out report). Scoring is :mod:`minideepseek.filters.fasttext_model`, shared with the filter.
"""
