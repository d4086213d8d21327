"""The first ledger schema: runs, rounds, LLM calls and answers.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dsstar_run",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("question_key", sa.String(), nullable=False, index=True),
        sa.Column("guidelines", sa.Text(), nullable=False, server_default=""),
        sa.Column("data", sa.String(), nullable=False, index=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("answer", sa.Text()),
        sa.Column("plan", sa.JSON()),
        sa.Column("solution", sa.Text()),
        sa.Column("reused_solution", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("rounds", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("llm_calls", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("input_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float()),
        sa.Column("started_at", sa.DateTime()),
        sa.Column("finished_at", sa.DateTime()),
        sa.Column("flow_run_id", sa.String()),
        sa.Column("artifacts_uri", sa.String()),
        sa.Column("error", sa.Text()),
    )
    op.create_table(
        "dsstar_round",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(), sa.ForeignKey("dsstar_run.run_id"), index=True),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("step", sa.Text(), nullable=False),
        sa.Column("route", sa.String()),
        sa.Column("verdict", sa.Boolean()),
        sa.Column("execution_ok", sa.Boolean(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float()),
        sa.Column("seconds", sa.Float(), nullable=False),
    )
    op.create_table(
        "dsstar_llm_call",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(), sa.ForeignKey("dsstar_run.run_id"), index=True),
        sa.Column("agent", sa.String(), nullable=False, index=True),
        sa.Column("label", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float()),
        sa.Column("latency_s", sa.Float(), nullable=False),
    )
    op.create_table(
        "dsstar_answer",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(), sa.ForeignKey("dsstar_run.run_id"), index=True),
        sa.Column("question_key", sa.String(), nullable=False, index=True),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("answered_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    for table in ("dsstar_answer", "dsstar_llm_call", "dsstar_round", "dsstar_run"):
        op.drop_table(table)
