"""Coding-agent front ends: verify-on-stop hooks, one policy for every agent.

PYTEST_DONT_REWRITE
"""
