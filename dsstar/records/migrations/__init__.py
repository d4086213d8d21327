"""The ledger's Alembic migrations (env.py, versions/), run by dsstar.records.ledger."""

# The newest revision in versions/ (a test holds it to Alembic's head): a ledger already at
# it is opened without importing Alembic.
HEAD = "0003"
VERSION_TABLE = "dsstar_alembic_version"
