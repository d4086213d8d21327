"""Runs and their records: what a run is given (form, trust, preflight, questions), what it
keeps in the store (record, claim; the store itself is `dsstar.storage`) and what a stored
status says of it (state), the ledger of runs, rounds and LLM calls (ledger, migrations/), and
what is read back (listing, report, notebook)."""

# The public names of this package are its modules, imported where they are used (several
# pull in heavy libraries that most commands never need).
__all__ = [
    "claim",
    "form",
    "ledger",
    "listing",
    "migrations",
    "notebook",
    "preflight",
    "questions",
    "record",
    "report",
    "state",
    "trust",
]
