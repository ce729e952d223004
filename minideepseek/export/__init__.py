"""Exports of the packed data to other trainers' formats (``.venv/bin/python -m minideepseek.export``)."""
