"""What navigation benchmarks share: the row schema, the run database, the runner, cluster
submission and statistics (layer 5). The FLYINGTRUST protocol, score, report and planners are
the study :mod:`volary.studies.flyingtrust`; ``protocol``, ``episode``, ``score`` and the other
modules it took are deprecated shims here."""
