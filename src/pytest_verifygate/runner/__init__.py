"""Running gates: the records (``records``, cheap to import: nothing is imported here), process
supervision (``process``, ``tree``, ``watchdog``, ``logfile``) and the scheduler.

PYTEST_DONT_REWRITE
"""
