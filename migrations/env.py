"""Alembic environment: the app's database and models (via Flask-Migrate or the app itself)."""

import logging

from alembic import context
from flask import current_app

config = context.config
log = logging.getLogger("alembic.env")
# No fileConfig(): the app has configured logging already and must keep its loggers.


def _migrate_ext():
    return current_app.extensions["migrate"]


def _skip_empty_autogenerate(ctx, revision, directives) -> None:
    """`flask db migrate` with no model change writes no empty revision file."""
    if getattr(config.cmd_opts, "autogenerate", False) and directives[0].upgrade_ops.is_empty():
        directives[:] = []
        log.info("No changes in schema detected.")


def _configure_args() -> dict:
    args = dict(_migrate_ext().configure_args)
    args.setdefault("process_revision_directives", _skip_empty_autogenerate)
    args.setdefault("compare_type", True)
    args.setdefault("render_as_batch", True)  # SQLite can only ALTER through table copies
    return args


def run_offline() -> None:
    """`flask db upgrade --sql`: print the SQL instead of running it."""
    url = _migrate_ext().db.engine.url.render_as_string(hide_password=False)
    context.configure(
        url=url, target_metadata=_migrate_ext().db.metadata, literal_binds=True, **_configure_args()
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    """Migrate over the connection the caller holds (it may carry the schema lock), or a new one."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    with _migrate_ext().db.engine.connect() as conn:
        _run(conn)


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=_migrate_ext().db.metadata, **_configure_args())
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
