"""The ledger's Alembic migrations (env.py, versions/), run by dsstar.records.ledger."""
