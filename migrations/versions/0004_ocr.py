"""OCR: a file record says whether its document waits for OCR (pending), got it, or failed.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("indexed_files") as batch:
        batch.add_column(sa.Column("ocr", sa.String(length=16), nullable=True))
        batch.create_index("ix_indexed_files_source_ocr", ["source_id", "ocr"])


def downgrade():
    with op.batch_alter_table("indexed_files") as batch:
        batch.drop_index("ix_indexed_files_source_ocr")
        batch.drop_column("ocr")
