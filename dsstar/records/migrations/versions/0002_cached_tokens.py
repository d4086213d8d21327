"""LLM calls record the input tokens the provider served from its prompt cache.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "dsstar_llm_call",
        sa.Column("cached_tokens", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("dsstar_llm_call") as batch:  # SQLite drops columns by copy
        batch.drop_column("cached_tokens")
