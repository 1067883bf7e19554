"""What a masked secret looks like and how long a value must be to be masked: ``MASK`` and the
lengths, shared by the redactor (``redact``), the search (``masking``) and the sinks' readings.

A leaf, apart from the search, so that the redactor can be built and asked about texts that
cannot hold a secret without loading the search at all (see ``redact.Redactor.text``).

PYTEST_DONT_REWRITE
"""

# What a secret is replaced by, in either kind of text.
MASK = "***"
# A value the contract marks secret is hidden from this length on; shorter ones would make
# the mask longer than the value (unbounded output) and garble unrelated text.
MIN_LISTED_SECRET_CHARS = 3
# Each line of a multi-line secret (a PEM key) is masked on its own from this length: a tool
# may print such a key line by line, indented or quoted.
MIN_SECRET_LINE_CHARS = 8
# A cut output (the tail window) may start inside a secret: an end of a secret at least this
# long at its start is masked. Shorter ends would mask ordinary words.
MIN_CUT_SECRET_CHARS = 6
