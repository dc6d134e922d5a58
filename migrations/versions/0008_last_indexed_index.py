"""Index (source_id, indexed_at): a source's latest indexing time is one lookup.

Without it `max(indexed_at)` of a source read every record (0.6 s at a million records, on
every status request and every load of the sources page).

Revision ID: 0008
Revises: 0002
Create Date: 2026-11-24
"""

from alembic import op

revision = "0008"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_indexed_files_source_indexed", "indexed_files",
                    ["source_id", "indexed_at"])


def downgrade():
    op.drop_index("ix_indexed_files_source_indexed", table_name="indexed_files")
