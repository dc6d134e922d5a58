"""Everyday use: the history of ended scans (Jobs) and each user's saved searches.

Revision ID: 0007
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "run_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.String(length=63), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=False),
        sa.Column("stats", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_run_records_source_finished", "run_records", ["source_id", "finished_at"],
                    unique=False)
    op.create_table(
        "saved_searches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("q", sa.Text(), nullable=False),
        sa.Column("source_id", sa.String(length=63), nullable=True),
        sa.Column("type", sa.String(length=32), nullable=True),
        sa.Column("sort", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "name", name="uq_saved_searches_user_name"),
    )


def downgrade():
    op.drop_table("saved_searches")
    op.drop_index("ix_run_records_source_finished", table_name="run_records")
    op.drop_table("run_records")
