"""Unbound Flask extensions; create_app binds them. Nothing else lives at module level.

Flask-Migrate (Alembic) is bound by create_app itself and flask-smorest's Api lives with the
API (webapp/api/__init__.py): neither is imported by the command-line app (create_cli_app),
whose commands need neither (docs/performance.md, "The CLI")."""

from flask_jwt_extended import JWTManager
from flask_limiter import Limiter
from flask_sqlalchemy import SQLAlchemy
from htmx_flask import Htmx
from sqlalchemy.orm import DeclarativeBase

from webapp.netaddr import client_address


class Base(DeclarativeBase):
    """Declarative base of every model."""


db = SQLAlchemy(model_class=Base)
jwt = JWTManager()
limiter = Limiter(key_func=client_address, default_limits=[], headers_enabled=True)
htmx = Htmx()  # request.htmx: the HX-* request headers, parsed
