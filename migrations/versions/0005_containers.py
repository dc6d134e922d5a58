"""Members of containers: the record of a member names the file on disk that holds it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("indexed_files") as batch:
        batch.add_column(sa.Column("container", sa.Text(), nullable=True))
    op.create_index("ix_indexed_files_source_container", "indexed_files",
                    ["source_id", "container"], unique=False)


def downgrade():
    op.drop_index("ix_indexed_files_source_container", table_name="indexed_files")
    with op.batch_alter_table("indexed_files") as batch:
        batch.drop_column("container")
