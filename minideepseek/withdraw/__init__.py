"""Deletion requests down to the packed shards (``withdraw.py``); see ``run.py`` for the order of work."""
