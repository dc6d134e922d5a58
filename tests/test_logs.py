"""Log lines: one JSON object per line with LOG_FORMAT=json (request id, source id, job id
when known), readable text by default; the request id of every response."""

from __future__ import annotations

import io
import json
import logging

import pytest

from webapp import create_app, logs


@pytest.fixture
def captured(app):
    """The lines our root handler (installed by the app) writes while the test runs."""
    handler = next(h for h in logging.getLogger().handlers if isinstance(h, logs._TrawlHandler))
    stream = io.StringIO()
    old = handler.setStream(stream)
    yield stream
    handler.setStream(old)


def json_app(app_config):
    return create_app({**app_config, "LOG_FORMAT": "json"})


def test_json_lines_carry_the_request_and_source(app_config, captured):
    app = json_app(app_config)
    with app.test_request_context(
        "/api/sources/holiday-photos/reindex", method="POST", headers={"X-Request-ID": "edge-7f3a"}
    ):
        app.preprocess_request()
        logging.getLogger("trawl.test").warning("scan asked for %s", "holiday-photos")
    line = json.loads(captured.getvalue().strip().splitlines()[-1])
    assert line["message"] == "scan asked for holiday-photos"
    assert line["level"] == "WARNING" and line["logger"] == "trawl.test"
    assert line["request_id"] == "edge-7f3a" and line["source_id"] == "holiday-photos"
    assert line["time"].endswith("+00:00") and "job_id" not in line


def test_json_lines_of_a_job_and_of_an_error(app_config, captured):
    json_app(app_config)
    with logs.bind(source_id="docs", job_id="job-1"):
        try:
            raise ValueError("bad pdf")
        except ValueError:
            logging.getLogger("trawl.test").exception("Extraction failed")
    line = json.loads(captured.getvalue().strip().splitlines()[-1])
    assert line["source_id"] == "docs" and line["job_id"] == "job-1"
    assert "ValueError: bad pdf" in line["exception"] and "request_id" not in line


def test_default_lines_stay_readable_text(app, captured):
    with logs.bind(source_id="docs"):
        logging.getLogger("trawl.test").warning("Batch 3 was lost")
    text = captured.getvalue().strip().splitlines()[-1]
    assert text.endswith("WARNING trawl.test: Batch 3 was lost  [source_id=docs]")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_one_root_handler_however_many_apps(app_config):
    json_app(app_config)
    create_app(app_config)
    ours = [h for h in logging.getLogger().handlers if isinstance(h, logs._TrawlHandler)]
    assert len(ours) == 1 and not isinstance(ours[0].formatter, logs.JsonFormatter)


def test_bad_log_format_is_refused(app_config):
    with pytest.raises(SystemExit, match="LOG_FORMAT"):
        create_app({**app_config, "LOG_FORMAT": "xml"})


@pytest.mark.parametrize(
    "sent, kept",
    [
        ("abc-123", True),
        ("req_9.f:1@edge/2+x=", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("two words", False),
        ('x"y', False),
        ("a\x1b[31m", False),
        ("", False),
    ],
)
def test_request_id_is_echoed_only_when_sane(client, sent, kept):
    resp = client.get("/api/health", headers={"X-Request-ID": sent} if sent else {})
    rid = resp.headers["X-Request-ID"]
    assert (rid == sent) is kept
    if not kept:
        assert len(rid) == 32 and rid.isalnum()


def test_gunicorn_access_lines_are_json_with_the_request_id(capsys):
    import logging.config

    from gunicorn.glogging import CONFIG_DEFAULTS

    from webapp.gunicorn_conf import json_logconfig

    loggers = [logging.getLogger(n) for n in ("", "gunicorn.access", "gunicorn.error")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    try:
        logging.config.dictConfig({**CONFIG_DEFAULTS, **json_logconfig("INFO")})  # as gunicorn
        loggers[1].info(
            '%(h)s "%(r)s" %(s)s rid=%({x-request-id}o)s',
            {"h": "10.0.0.9", "r": "GET /api/health HTTP/1.1", "s": "200", "{x-request-id}o": "edge-42"},
        )
    finally:  # the other tests' logging as it was
        for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate = propagate
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["logger"] == "gunicorn.access" and line["request_id"] == "edge-42"
    assert line["message"] == '10.0.0.9 "GET /api/health HTTP/1.1" 200 rid=edge-42'


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_launcher_lines(capsys, log_format):
    from webapp import launcher

    launcher.setup_logging(log_format)
    try:
        launcher.say("redis restarted (pid 42, restart 1)")
    finally:
        launcher.log.handlers.clear()
        launcher.log.propagate = True
    out = capsys.readouterr().out.strip()
    if log_format == "json":
        line = json.loads(out)
        assert line["logger"] == "trawl.launcher" and line["level"] == "INFO"
        assert line["message"] == "redis restarted (pid 42, restart 1)"
    else:
        assert out.endswith(" [launcher] redis restarted (pid 42, restart 1)")
