"""The tool's own state: what decides a verdict (the result cache, the record of written
reports) in the user's private state directory; run logs and gate durations under the git
directory.

PYTEST_DONT_REWRITE
"""
