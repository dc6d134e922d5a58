"""Indexing: scanning, extraction and the indexing pipeline."""
