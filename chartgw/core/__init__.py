"""Foundations every layer uses: the clock, countries, text, progress, and the settings."""
