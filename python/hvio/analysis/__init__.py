"""The analyses of the papers' experiments (``hvio reproduce NAME``).

Each module takes a finished sweep of its study (:class:`hvio.sweeps.Sweep`:
``.frame`` is the numeric long-form table, one row per run × VM × job) and
the paper's numbers (the study's ``reference`` file, as a dict) and returns
an :class:`hvio.studies.Analysis`: the paper's tables with hvio's numbers
beside the paper's, and notes saying which goals were met.
"""
