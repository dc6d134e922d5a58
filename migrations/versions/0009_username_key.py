"""Usernames unique regardless of case and Unicode normalisation: `users.username_key`.

The key is NFKC + casefold of the username (webapp.validation.username_key); it is unique and
login looks it up. Existing accounts whose names clash (`admin` and `Admin`) cannot share a
key: the oldest account (lowest id) keeps its name, each later one is renamed to
`<name>-<id>` (cut to fit 50 characters), keeping its password, role, grants and tokens, and
the migration prints every rename so the admin can tell those users their new login name.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _key(name: str) -> str:
    # a copy of validation.username_key: a migration must not change when the code does
    return unicodedata.normalize("NFKC", name).casefold()


def upgrade():
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("username_key", sa.String(200), nullable=True))
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, username FROM users ORDER BY id")).fetchall()
    taken = {_key(name) for _, name in rows}
    seen: set[str] = set()
    for user_id, name in rows:
        key = _key(name)
        if key in seen:
            suffix = f"-{user_id}"
            new = name[:50 - len(suffix)] + suffix
            while _key(new) in taken:
                new = new[:49 - len(suffix)] + "_" + suffix
            print(f"username_key: account {user_id} {name!r} clashes with an older account; "
                  f"renamed to {new!r}")
            conn.execute(sa.text("UPDATE users SET username = :n WHERE id = :i"),
                         {"n": new, "i": user_id})
            name, key = new, _key(new)
            taken.add(key)
        seen.add(key)
        conn.execute(sa.text("UPDATE users SET username_key = :k WHERE id = :i"),
                     {"k": key, "i": user_id})
    with op.batch_alter_table("users") as batch:
        batch.alter_column("username_key", existing_type=sa.String(200), nullable=False)
        batch.create_unique_constraint("uq_users_username_key", ["username_key"])


def downgrade():
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint("uq_users_username_key", type_="unique")
        batch.drop_column("username_key")
