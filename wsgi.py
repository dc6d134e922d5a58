"""WSGI entry point for gunicorn (`gunicorn wsgi:app`) and the CLI (`flask --app wsgi ...`)."""

from webapp import create_app, metrics_dir

metrics_dir.prepare()  # before create_app imports prometheus_client
app = create_app()
