"""Alembic environment for the ledger: migrations run on the connection dsstar hands over."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table="dsstar_alembic_version")
with context.begin_transaction():
    context.run_migrations()
