"""Exports of the packed data to other trainers' formats (``python -m minideepseek.export``)."""
