"""Running gates: records, process supervision and the scheduler (nothing imported here).

PYTEST_DONT_REWRITE
"""
