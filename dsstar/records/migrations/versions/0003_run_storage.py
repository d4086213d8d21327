"""Each run names the storage that holds it, and a reused solution the run it came from:
the runs, history and reuse a command sees are those of its storage.

Existing rows keep everything; their storage is read from their artifacts URI
(`<storage>/runs/<run_id>`). A row without one keeps no storage and is seen by none.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dsstar_run") as batch:
        batch.add_column(sa.Column("storage", sa.String()))
        batch.add_column(sa.Column("reused_from", sa.String()))
        batch.create_index("ix_dsstar_run_storage", ["storage"])
    suffix = sa.literal("/runs/") + sa.column("run_id")
    uri = sa.column("artifacts_uri")
    run = sa.table("dsstar_run", sa.column("run_id"), uri, sa.column("storage"))
    op.execute(
        run.update()
        .where(
            uri.like("%/runs/%"),
            sa.func.substr(uri, sa.func.length(uri) - sa.func.length(suffix) + 1) == suffix,
        )
        .values(storage=sa.func.substr(uri, 1, sa.func.length(uri) - sa.func.length(suffix)))
    )


def downgrade() -> None:
    with op.batch_alter_table("dsstar_run") as batch:  # SQLite drops columns by copy
        batch.drop_index("ix_dsstar_run_storage")
        batch.drop_column("reused_from")
        batch.drop_column("storage")
