"""The run dashboard (``report.py``): one run's figures or two runs side by side with drift flags."""
