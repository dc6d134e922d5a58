"""Users, access and API tokens: account state, source grants and tokens for scripts.

Existing accounts stay as they were: active, with their role (an admin sees everything).

Revision ID: 0003
Revises: 0007
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    # The server defaults fill the existing rows, then go: the models set the values.
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("active", sa.Boolean(), nullable=False,
                                   server_default=sa.true()))
        batch.add_column(sa.Column("last_login_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("generation", sa.Integer(), nullable=False,
                                   server_default="0"))
    with op.batch_alter_table("users") as batch:
        batch.alter_column("active", server_default=None)
        batch.alter_column("generation", server_default=None)
    op.create_table(
        "user_sources",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.String(length=63), nullable=False),
        sa.ForeignKeyConstraint(["source_id"], ["sources.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "source_id"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("last_used_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"], unique=False)


def downgrade():
    op.drop_index("ix_api_tokens_user_id", table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_table("user_sources")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("generation")
        batch.drop_column("last_login_at")
        batch.drop_column("active")
