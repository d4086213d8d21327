"""What a run keeps: its objects in the store (record; the store itself is `dsstar.storage`),
its claim on a run id (claim) and what makes it that run (identity), what a stored status says
of it (state), and the ledger of runs, rounds and LLM calls (ledger, migrations/)."""

# The public names of this package are its modules, imported where they are used.
__all__ = ["claim", "identity", "ledger", "migrations", "record", "state"]
