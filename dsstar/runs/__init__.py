"""Runs and their records: what a run is given (form, trust, preflight, questions), where it
keeps what it makes (storage, record, claim), the ledger of runs, rounds and LLM calls
(ledger, migrations/), and what is read back (listing, report, notebook)."""
