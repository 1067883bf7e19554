"""What a run says, and to whom: every output made from a run, one module per form.

Nothing is imported here, so that loading one form (``report.junit`` for a JUnit file, say)
does not load the others or the JSON builder.

- ``document``: the JSON report (docs: JSON report), its schema (``report.schema.json``) and
  its atomic write; every other form below is made from the report it builds.
- ``model``: the report's types (``TypedDict``s matching the schema), read by every form below.
- ``redact``: which values are secret, and masking them as output is captured.
- ``words``: the words every text form shares (outcome counts, durations, a failed gate's code).
- ``junit``: JUnit XML, and a failed gate's headline and failure text (also the pytest plugin's).
- ``digest``: the bounded Markdown digest for coding agents, and the failure signature.
- ``console``: what ``verifygate run`` prints: progress lines, recap table, verdict line.
- ``github``: GitHub Actions output: error annotations and the step summary, and workflow
  commands stopped around untrusted text.
- ``locations``: tool output read back as errors with a place (the built-in formats).
- ``places``: those errors resolved to files of the repository; the annotation hook.

PYTEST_DONT_REWRITE
"""
