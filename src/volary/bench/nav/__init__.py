"""The FLYINGTRUST navigation benchmark: protocol, runner, storage, statistics, report.

Layer 5. The row schema every part shares is in :mod:`volary.bench.nav.schema`.
"""
