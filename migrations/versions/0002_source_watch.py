"""Sources gain `watch`: follow file changes under the root (live index), on by default.

Revision ID: 0002
Revises: 0005
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("sources") as batch:
        batch.add_column(sa.Column("watch", sa.Boolean(), nullable=False,
                                   server_default=sa.true()))


def downgrade():
    with op.batch_alter_table("sources") as batch:
        batch.drop_column("watch")
