"""WSGI entry point for gunicorn (`gunicorn wsgi:app`) and the CLI (`flask --app wsgi ...`)."""

import webapp
from webapp import metrics_dir

metrics_dir.prepare()  # before the factory's module imports prometheus_client
app = webapp.create_app()
