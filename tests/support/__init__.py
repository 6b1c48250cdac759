"""Test support: servers and helpers that the fixtures in ``tests/conftest.py`` start."""
