# syntax=docker/dockerfile:1
# Trawl image: one image for the web server, the RQ workers and the scheduler (docker-compose.yml).
# Build: docker build -t trawl .   Run the whole stack: see docs/deployment.md.

# --- 1. browser assets (htmx, Swagger UI, ReDoc) from the npm registry, as `make assets` does -------
FROM node:20-bookworm-slim AS assets
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
 && mkdir -p vendor/htmx vendor/swagger-ui vendor/redoc vendor/pdfjs/wasm \
 && cp node_modules/htmx.org/dist/htmx.min.js vendor/htmx/ \
 && cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css vendor/swagger-ui/ \
 && cp node_modules/redoc/bundles/redoc.standalone.js vendor/redoc/ \
 && cp node_modules/pdfjs-dist/legacy/build/pdf.min.mjs node_modules/pdfjs-dist/legacy/build/pdf.worker.min.mjs node_modules/pdfjs-dist/LICENSE vendor/pdfjs/ \
 && cp -r node_modules/pdfjs-dist/cmaps node_modules/pdfjs-dist/standard_fonts vendor/pdfjs/ \
 && cp node_modules/pdfjs-dist/wasm/openjpeg* node_modules/pdfjs-dist/wasm/jbig2* node_modules/pdfjs-dist/wasm/qcms* node_modules/pdfjs-dist/wasm/LICENSE_* vendor/pdfjs/wasm/ \
 && touch vendor/.installed

# --- 2. Python dependencies in a virtualenv (wheels only: no compiler in the final image) ------------
FROM python:3.11-slim-bookworm AS python-deps
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/pip install -r /tmp/requirements.txt

# --- 3. runtime ----------------------------------------------------------------------------------
FROM python:3.11-slim-bookworm AS runtime
# libarchive-tools: bsdtar, which reads RAR members (and .cbr comics); unar: encrypted RAR members
# tesseract-ocr: OCR of scanned pages and images (English, German, French, Spanish, Italian,
# Portuguese, Dutch; OCR_LANGUAGES picks among them)
RUN apt-get update \
 && apt-get install -y --no-install-recommends libarchive-tools unar tesseract-ocr tesseract-ocr-eng \
      tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-spa tesseract-ocr-ita tesseract-ocr-por \
      tesseract-ocr-nld \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 trawl \
 && useradd --system --uid 10001 --gid trawl --home-dir /home/trawl --create-home \
      --shell /usr/sbin/nologin trawl \
 && mkdir -p /var/lib/trawl /data \
 && chown trawl:trawl /var/lib/trawl
COPY --from=python-deps /opt/venv /opt/venv
WORKDIR /app
COPY . /app
COPY --from=assets /build/vendor /app/static/vendor
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DATA_DIR=/var/lib/trawl \
    ALLOWED_ROOTS=/data \
    HOST=0.0.0.0 \
    PORT=8000
# The code stays owned by root (read-only for the service); only DATA_DIR is writable.
USER trawl
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/api/health', timeout=4)"]
# `trawl init` first (folders, secret, newest schema; safe to repeat), so a plain `docker run` of
# this image starts on an empty volume; docker compose runs it once in its `init` service.
CMD ["sh", "-c", "flask --app wsgi trawl init && exec gunicorn -c python:webapp.gunicorn_conf wsgi:app"]
