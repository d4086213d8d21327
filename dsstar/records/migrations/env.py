"""Alembic environment for the ledger: migrations run on the connection dsstar hands over."""

from alembic import context

from dsstar.records.migrations import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
