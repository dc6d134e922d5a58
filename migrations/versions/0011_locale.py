"""The UI's language per user: `users.locale` ('en', 'de'; empty: the browser's choice).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("locale", sa.String(8), nullable=True))


def downgrade():
    with op.batch_alter_table("users") as batch:
        batch.drop_column("locale")
