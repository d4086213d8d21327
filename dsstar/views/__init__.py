"""What is read back from the records: lists of runs (listing), a run's report (report) and
its notebook (notebook)."""

# The public names of this package are its modules, imported where they are used.
__all__ = ["listing", "notebook", "report"]
