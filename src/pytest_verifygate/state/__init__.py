"""The tool's own state under the git directory: run logs, the result cache, gate durations,
written reports and the checks that it was not tampered with.

PYTEST_DONT_REWRITE
"""
