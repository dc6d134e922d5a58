"""The hash of each file's extracted text (`indexed_files.text_hash`): identical texts are
listed once and embedded once. Existing records have none (NULL) until their file is extracted
again (a full scan, or the file's next change): until then they are copies of nothing.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("indexed_files") as batch:
        batch.add_column(sa.Column("text_hash", sa.String(64), nullable=True))
        batch.create_index("ix_indexed_files_text_hash", ["text_hash", "source_id"])


def downgrade():
    with op.batch_alter_table("indexed_files") as batch:
        batch.drop_index("ix_indexed_files_text_hash")
        batch.drop_column("text_hash")
