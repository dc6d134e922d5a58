"""Unbound Flask extensions; create_app binds them. Nothing else lives at module level."""

from flask_jwt_extended import JWTManager
from flask_limiter import Limiter
from flask_migrate import Migrate
from flask_smorest import Api
from flask_sqlalchemy import SQLAlchemy
from htmx_flask import Htmx
from sqlalchemy.orm import DeclarativeBase

from webapp.netaddr import client_address


class Base(DeclarativeBase):
    """Declarative base of every model."""


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
jwt = JWTManager()
limiter = Limiter(key_func=client_address, default_limits=[], headers_enabled=True)
api = Api()
htmx = Htmx()  # request.htmx: the HX-* request headers, parsed
