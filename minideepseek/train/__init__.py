"""Stage 5: a small decoder-only transformer trained on the packed shards (``smoke_train.py``).

It proves the data trains: the loader memory-maps the shards, holds out validation blocks, splits
training blocks across ranks deterministically and resumes exactly; the model masks attention per
document; the loss over a 150K vocabulary is computed in chunks so the (B, T, V) logits never exist.
"""
