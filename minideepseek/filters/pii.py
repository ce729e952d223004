"""placeholder; being written."""
