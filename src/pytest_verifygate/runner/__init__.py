"""Running gates: the records, the process supervision and the scheduler.

- ``runner.records``: ``GatePlan``, ``CacheSlot``, ``GateResult`` (cheap to import);
- ``runner.process``: one attempt of a gate, its process group, output, deadline and signals;
- ``runner.scheduler``: ``GateRunner`` (concurrency, retries, classification, cancelling).

Nothing is imported here: importing ``runner.records`` must never load the scheduler.

PYTEST_DONT_REWRITE
"""
