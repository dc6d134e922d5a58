"""Meaning (semantic search): sources gain `semantic` (on by default) and file records
`embedded` (their passages are in the vector store; false for every existing record, so the
embedding phase reads them once).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("sources") as batch:
        batch.add_column(sa.Column("semantic", sa.Boolean(), nullable=False,
                                   server_default=sa.true()))
    with op.batch_alter_table("indexed_files") as batch:
        batch.add_column(sa.Column("embedded", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
    op.create_index("ix_indexed_files_source_embedded", "indexed_files",
                    ["source_id", "embedded"])


def downgrade():
    op.drop_index("ix_indexed_files_source_embedded", table_name="indexed_files")
    with op.batch_alter_table("indexed_files") as batch:
        batch.drop_column("embedded")
    with op.batch_alter_table("sources") as batch:
        batch.drop_column("semantic")
