"""Reliability and security tests: process trees, reports, hostile input, load, output, secrets.

A package (unlike the flat ``tests/`` directory) so its module names cannot clash with the
test modules beside it; ``from conftest import ...`` still finds ``tests/conftest.py``.
"""
