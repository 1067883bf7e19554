"""Every output made from a run, one module per form (docs: How a run works has the map).

Nothing is imported here, so that loading one form does not load the others.

PYTEST_DONT_REWRITE
"""
