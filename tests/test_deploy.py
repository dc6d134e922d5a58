"""Deployment files read as an operator would: compose file, Dockerfile, .env.example, gunicorn."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from webapp import config

REPO = Path(__file__).resolve().parent.parent
APP_SERVICES = ("web", "worker", "scheduler", "watcher")
SERVICES = {"init", "web", "worker", "scheduler", "watcher", "redis", "meilisearch", "postgres"}
VAR_RE = re.compile(r"\$\{([A-Z0-9_]+)(?:(:?[-?])([^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    """The variables .env.example sets, with their values."""
    pairs = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error} substitution."""

    def sub(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise ValueError(f"{name}: {arg}")
        return arg if op == ":-" else ""

    return VAR_RE.sub(sub, value)


def mounts(service: dict) -> list[tuple[str, str, str]]:
    """(source, target, mode) of each short-syntax volume entry."""
    result = []
    for entry in service.get("volumes", []):
        parts = entry.rsplit(":", 2) if entry.count(":") >= 2 else [*entry.split(":", 1), "rw"]
        result.append((parts[0], parts[1], parts[2]))
    return result


# -- docker-compose.yml ------------------------------------------------------------------------


def test_compose_has_the_eight_services(services):
    assert set(services) == SERVICES


def test_init_prepares_the_data_once_before_the_app_services(services):
    """`flask trawl init` is a one-shot service on the data volume: the long-running ones
    start only once it has succeeded (they never migrate the schema themselves)."""
    init = services["init"]
    assert init["command"] == ["flask", "--app", "wsgi", "trawl", "init"]
    assert init["restart"] == "no" and ("trawl-data", "/var/lib/trawl", "rw") in mounts(init)
    for name in APP_SERVICES:
        assert services[name]["depends_on"]["init"] == {"condition": "service_completed_successfully"}, name


def test_only_web_is_published_and_on_port_8000(services):
    assert services["web"]["ports"] == ["8000:8000"]
    published = [name for name, svc in services.items() if svc.get("ports")]
    assert published == ["web"], "databases and queues must stay on the internal network"


def test_worker_can_be_scaled(services):
    worker = services["worker"]
    assert "container_name" not in worker
    assert not worker.get("ports"), "a fixed host port would stop `--scale worker=N`"
    assert worker["command"] == ["python", "worker.py"]
    assert services["scheduler"]["command"] == ["python", "worker.py", "scheduler"]
    assert services["watcher"]["command"] == ["python", "worker.py", "watcher"]
    assert mounts(services["watcher"]) == mounts(worker), "the watcher sees the same folders"


def test_web_runs_gunicorn_with_our_config(services):
    command = services["web"]["command"]
    assert command[0] == "gunicorn"
    assert "python:webapp.gunicorn_conf" in command and command[-1] == "wsgi:app"


def test_every_service_has_a_health_check_and_restarts(services):
    for name, svc in services.items():
        if name == "init":
            continue  # one-shot: it ends, and the others wait for its success
        assert svc.get("healthcheck", {}).get("test"), f"{name} has no health check"
        assert svc.get("restart") in {"always", "unless-stopped", "on-failure"}, name


def test_web_health_check_asks_the_health_endpoint(services):
    test = " ".join(services["web"]["healthcheck"]["test"])
    assert "http://127.0.0.1:8000/api/health" in test


def test_app_services_wait_for_healthy_backends(services):
    for name in (*APP_SERVICES, "init"):
        deps = services[name]["depends_on"]
        for backend in ("postgres", "redis", "meilisearch"):
            assert deps[backend]["condition"] == "service_healthy", (name, backend)


def test_state_lives_in_named_volumes(compose, services):
    declared = set(compose["volumes"])
    expected = {
        "postgres": "/var/lib/postgresql/data",
        "redis": "/data",
        "meilisearch": "/meili_data",
        "web": "/var/lib/trawl",
    }
    for name, target in expected.items():
        named = {t: s for s, t, _ in mounts(services[name]) if s in declared}
        assert target in named, f"{name} keeps {target} outside a named volume"
    used = {s for svc in services.values() for s, _, _ in mounts(svc)}
    assert declared <= used, f"unused volumes: {declared - used}"


def test_sources_are_mounted_read_only_under_data(services):
    for name in ("web", "worker"):
        sources = [(s, t, m) for s, t, m in mounts(services[name]) if t.startswith("/data")]
        assert sources, f"{name} sees no source folder"
        for _source, target, mode in sources:
            assert target.startswith("/data/") and "ro" in mode.split(","), (name, target, mode)
    # a path is what Trawl records: the web (preview, download) and workers must agree on it
    assert mounts(services["web"]) == mounts(services["worker"])


def test_app_services_read_env_file_and_point_at_the_backends(services):
    for name in (*APP_SERVICES, "init"):
        svc = services[name]
        assert svc["env_file"] in (".env", [".env"])
        env = svc["environment"]
        assert env["DATABASE_URL"].startswith("postgresql+psycopg://")
        assert "@postgres:5432/" in env["DATABASE_URL"]
        assert "@redis:6379" in env["REDIS_URL"]
        assert env["SEARCH_BACKEND"] == "meilisearch"
        assert env["MEILI_URL"] == "http://meilisearch:7700"
        assert env["ALLOWED_ROOTS"] == "/data"


def test_no_secret_is_written_in_the_compose_file(services):
    for name, svc in services.items():
        env = svc.get("environment", {})
        for key, value in env.items():
            if re.search(r"PASSWORD|SECRET|KEY|AUTH", key) or key.endswith("_URL") and "@" in value:
                assert "${" in str(value), f"{name}.{key} is hard-coded"


def test_env_example_documents_every_variable_of_the_compose_file(env_example):
    text = (REPO / "docker-compose.yml").read_text()
    used = {m.group(1) for m in VAR_RE.finditer(text)}
    assert {"SECRET_KEY", "POSTGRES_PASSWORD", "MEILI_MASTER_KEY"} <= used
    missing = used - set(env_example)
    assert not missing, f".env.example does not document {sorted(missing)}"
    lines = (REPO / ".env.example").read_text().splitlines()
    for name in used:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{name}="))
        assert lines[at - 1].startswith("#"), f"{name} has no comment in .env.example"


def test_required_secrets_stop_compose_when_missing(services, env_example):
    required = {
        m.group(1) for m in VAR_RE.finditer((REPO / "docker-compose.yml").read_text()) if m.group(2) == ":?"
    }
    assert {"SECRET_KEY", "POSTGRES_PASSWORD", "MEILI_MASTER_KEY", "REDIS_PASSWORD"} <= required
    for name in required:
        assert env_example[name] == "", f"{name} must not ship with a usable default"


def test_compose_environment_loads_as_trawl_settings(services, env_example, tmp_path):
    """What a container sees: the image's ENV, then .env, then the service's environment."""
    dotenv = {
        **env_example,
        "SECRET_KEY": "s" * 32,
        "POSTGRES_PASSWORD": "pg0pass",
        "REDIS_PASSWORD": "redis0pass",
        "MEILI_MASTER_KEY": "m" * 32,
    }
    env = {**dockerfile_env(), **dotenv}
    env.update({k: interpolate(str(v), dotenv) for k, v in services["worker"]["environment"].items()})
    env["DATA_DIR"] = str(tmp_path)  # /var/lib/trawl does not exist outside the image
    cfg = config.load(environ=env)
    assert cfg["DATABASE_URL"] == "postgresql+psycopg://trawl:pg0pass@postgres:5432/trawl"
    assert cfg["REDIS_URL"] == "redis://:redis0pass@redis:6379/0"
    assert cfg["ALLOWED_ROOTS"] == ["/data"]
    assert cfg["SECRET_KEY"] == "s" * 32
    assert (cfg["HOST"], cfg["PORT"]) == ("0.0.0.0", 8000)


def test_missing_secret_is_reported_by_name(services):
    with pytest.raises(ValueError, match="POSTGRES_PASSWORD"):
        interpolate(services["web"]["environment"]["DATABASE_URL"], {})


# -- Dockerfile --------------------------------------------------------------------------------


def dockerfile_stages() -> list[list[str]]:
    """Instructions (continuation lines joined) grouped by stage."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def dockerfile_env() -> dict[str, str]:
    """The ENV of the final stage."""
    env = {}
    for line in dockerfile_stages()[-1]:
        if line.upper().startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def test_dockerfile_is_multi_stage_with_an_assets_stage():
    stages = dockerfile_stages()
    assert len(stages) >= 2
    names = [s[0].split()[-1] for s in stages if " AS " in s[0].upper()]
    assert "assets" in names
    assets = next(s for s in stages if s[0].endswith(" AS assets"))
    assert assets[0].split()[1].startswith("node:")
    assert any("npm ci" in line for line in assets)


def test_assets_stage_installs_what_make_assets_does():
    makefile = (REPO / "Makefile").read_text()
    wanted = set(re.findall(r"node_modules/\S+", makefile))
    assert wanted, "the Makefile's assets target lists the files it copies"
    assets = " ".join(next(s for s in dockerfile_stages() if s[0].endswith(" AS assets")))
    assert wanted <= set(re.findall(r"node_modules/\S+", assets))
    final = " ".join(dockerfile_stages()[-1])
    assert re.search(r"COPY --from=assets \S+ /app/static/vendor", final)


def test_final_stage_runs_as_a_non_root_user():
    final = dockerfile_stages()[-1]
    users = [line.split()[1] for line in final if line.upper().startswith("USER ")]
    assert users and users[-1] not in {"root", "0", "0:0"}
    assert not final[0].split()[1].startswith("node:")


def test_image_settings_and_entry():
    env = dockerfile_env()
    assert env["ALLOWED_ROOTS"] == "/data"
    assert env["PORT"] == "8000"
    final = dockerfile_stages()[-1]
    assert any("EXPOSE 8000" in line for line in final)
    cmd = next(line for line in final if line.startswith("CMD "))
    assert "gunicorn" in cmd and "webapp.gunicorn_conf" in cmd
    assert cmd.index("flask --app wsgi trawl init &&") < cmd.index("exec gunicorn")
    deps = " ".join(line for stage in dockerfile_stages() for line in stage)
    assert "pip install -r /tmp/requirements.txt" in deps


def test_files_the_dockerfile_copies_exist_and_secrets_stay_out():
    text = (REPO / "Dockerfile").read_text()
    for name in ("package.json", "package-lock.json", "requirements.txt"):
        assert name in text and (REPO / name).exists()
    ignored = (REPO / ".dockerignore").read_text().split()
    for entry in (".env", ".venv", "node_modules", "data", ".git"):
        assert entry in ignored


# -- gunicorn ----------------------------------------------------------------------------------


@pytest.fixture
def gconf(tmp_path, monkeypatch):
    """webapp.gunicorn_conf, imported with a data folder of the test (it loads the settings)."""
    import importlib

    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    return importlib.import_module("webapp.gunicorn_conf")


def test_gunicorn_workers_follow_the_core_count(gconf):
    gunicorn_settings = gconf.gunicorn_settings
    base = {
        "HOST": "0.0.0.0",
        "PORT": 8000,
        "TRUSTED_PROXIES": [],
        "LOG_LEVEL": "INFO",
        "DATA_DIR": "/var/lib/trawl",
    }
    assert gunicorn_settings({**base, "WEB_CONCURRENCY": 0}, cores=1)["workers"] == 2
    assert gunicorn_settings({**base, "WEB_CONCURRENCY": 0}, cores=3)["workers"] == 4
    assert gunicorn_settings({**base, "WEB_CONCURRENCY": 0}, cores=64)["workers"] == 8
    assert gunicorn_settings({**base, "WEB_CONCURRENCY": 12}, cores=2)["workers"] == 12
    settings = gunicorn_settings({**base, "WEB_CONCURRENCY": 0}, cores=2)
    assert settings["bind"] == "0.0.0.0:8000"
    assert settings["graceful_timeout"] > 0 and settings["accesslog"] == "-"
    assert settings["control_socket"] == "/var/lib/trawl/gunicorn.ctl"


def test_forwarded_headers_are_believed_only_from_trusted_proxies(gconf):
    trusted_networks = gconf.trusted_networks
    assert trusted_networks([]) == ""  # nobody: gunicorn ignores X-Forwarded-Proto
    assert trusted_networks(["10.1.2.3", "172.18.0.0/16"]) == "10.1.2.3/32,172.18.0.0/16"
    assert trusted_networks(["10.0.0.1/8", "not-an-ip"]) == "10.0.0.0/8"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.slow
def test_gunicorn_serves_the_api_and_static_assets(tmp_path, redis_url, database_url):
    port = _free_port()
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path / "data"),
        "REDIS_URL": redis_url,
        "DATABASE_URL": database_url,
        "ALLOWED_ROOTS": str(tmp_path),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "SEARCH_BACKEND": "tantivy",
        "SEARCH_INDEX_DIR": "",
    }
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "wsgi:app"]
    refused = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )  # before `trawl init`: one clear line, no traceback
    assert refused.returncode != 0
    assert f"Trawl's data folder {tmp_path / 'data'} is not initialised" in refused.stderr
    assert "Traceback" not in refused.stderr and "Booting worker" not in refused.stderr
    init = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "wsgi", "trawl", "init"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert init.returncode == 0 and "is ready" in init.stdout, init.stderr
    log = tmp_path / "gunicorn.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "wsgi:app"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        status = None
        deadline = time.monotonic() + 60  # a start takes ~2 s; 10 s were not enough under load
        while status is None and time.monotonic() < deadline:
            try:
                status, body = _get(f"{base}/api/health")
            except OSError:
                time.sleep(0.1)
        assert status in (200, 503), log.read_text()
        assert b'"components"' in body
        css = next((REPO / "static").rglob("*.css"))
        status, _ = _get(f"{base}/static/{css.relative_to(REPO / 'static').as_posix()}")
        assert status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=40)
    text = log.read_text()
    assert '"GET /api/health HTTP/1.1"' in text and "rid=" in text  # the access log
    assert str(tmp_path / "data" / "gunicorn.ctl") in text
    assert proc.returncode == 0, text  # TERM is a graceful, clean stop
