# Trawl: `make run` sets everything up and starts the service; `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
VENDOR := static/vendor

.PHONY: run test test-fast install install-dev assets chromium tesseract rartool services lint translations bench bench-quick bench-relevance clean

run: install assets tesseract rartool
	$(BIN)/python -m webapp.launcher

# The suite runs twice, side by side: on SQLite and on PostgreSQL (a database made for the run
# on the local server, user postgres) when one answers on 127.0.0.1:5432; browser tests only in
# the SQLite pass, and the PostgreSQL pass runs only the tests marked `pg`, whose outcome depends
# on the database dialect (tests/conftest.py). Its output is printed after the SQLite pass's.
# Each pass prints its 15 slowest tests (--durations=15 in pyproject.toml).
# The SQLite pass runs on three pytest-xdist workers (tests sharing a module fixture stay on one
# worker, tests/conftest.py; docs/architecture.md, "Tests"); `make test XDIST=` runs it in one
# process.
XDIST ?= -n 3 --dist loadgroup
PG_CHECK := import psycopg; psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3").close()

test: install-dev assets chromium tesseract rartool services
	@status=0; pg_pid=; pg_log=$$(mktemp); \
	if $(BIN)/python -c '$(PG_CHECK)' 2>/dev/null; then \
	  echo "== PostgreSQL pass (127.0.0.1:5432) started beside the SQLite pass; its output follows =="; \
	  TRAWL_TEST_DATABASE=postgres $(BIN)/python -m pytest -m "not browser" $(PYTEST_ARGS) \
	    > $$pg_log 2>&1 & pg_pid=$$!; \
	  trap 'kill $$pg_pid 2>/dev/null; rm -f $$pg_log; exit 130' INT TERM; \
	else \
	  echo "== PostgreSQL pass SKIPPED: no PostgreSQL answers on 127.0.0.1:5432 as user postgres =="; \
	fi; \
	echo "== test suite on SQLite =="; \
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS) || status=$$?; \
	if [ -n "$$pg_pid" ]; then \
	  wait $$pg_pid; pg=$$?; \
	  echo "== test suite on PostgreSQL (127.0.0.1:5432) =="; cat $$pg_log; \
	  [ $$status -ne 0 ] || status=$$pg; \
	fi; \
	rm -f $$pg_log; exit $$status

# The lane for every push: the SQLite pass without the slow and the browser tests (about a
# third of the suite's time; `make test` before a merge runs everything, PostgreSQL too).
test-fast: install-dev assets services
	$(BIN)/python -m pytest $(XDIST) -m "not slow and not browser" $(PYTEST_ARGS)

install: $(VENV)/.installed

# The project itself is installed too (editable, without dependencies: requirements.txt pins
# them) for its console script, the `trawl` command: .venv/bin/trawl.
$(VENV)/.installed: requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11+ is needed"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -qq --no-deps -e .  # -qq: no banner about the editable mode
	touch $@

install-dev: $(VENV)/.installed-dev

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	touch $@

# Browser assets (htmx, Swagger UI, ReDoc, pdf.js) come from the npm registry and are served by Trawl itself.
assets: $(VENDOR)/.installed

$(VENDOR)/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "npm is needed for the browser assets (apt-get install npm)"; exit 1; }
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	rm -rf $(VENDOR) && mkdir -p $(VENDOR)/htmx $(VENDOR)/swagger-ui $(VENDOR)/redoc $(VENDOR)/pdfjs/wasm
	cp node_modules/htmx.org/dist/htmx.min.js $(VENDOR)/htmx/
	cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css $(VENDOR)/swagger-ui/
	cp node_modules/redoc/bundles/redoc.standalone.js $(VENDOR)/redoc/
	# pdf.js: the legacy ES-module build, its fonts and CMaps, and the image decoders (never the
	# scripting sandbox nor quickjs: the viewer runs no PDF JavaScript)
	cp node_modules/pdfjs-dist/legacy/build/pdf.min.mjs node_modules/pdfjs-dist/legacy/build/pdf.worker.min.mjs node_modules/pdfjs-dist/LICENSE $(VENDOR)/pdfjs/
	cp -r node_modules/pdfjs-dist/cmaps node_modules/pdfjs-dist/standard_fonts $(VENDOR)/pdfjs/
	cp node_modules/pdfjs-dist/wasm/openjpeg* node_modules/pdfjs-dist/wasm/jbig2* node_modules/pdfjs-dist/wasm/qcms* node_modules/pdfjs-dist/wasm/LICENSE_* $(VENDOR)/pdfjs/wasm/
	touch $@

# Debian's chromium for the browser tests (skipped with a message when it cannot be installed).
chromium:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium could not be installed: browser tests will be skipped"; \
	  else echo "chromium missing and not root: browser tests will be skipped"; fi; }

# Tesseract for OCR (English, and tesseract-ocr-<lang> for each other language of OCR_LANGUAGES):
# installed when root; otherwise Trawl runs without OCR and its workers say so once at start.
OCR_LANGS := $(shell [ -n "$$OCR_LANGUAGES" ] || . ./.env >/dev/null 2>&1; echo "$${OCR_LANGUAGES:-eng}" | tr '+,' '  ')
tesseract:
	@missing=""; \
	for lang in eng $(OCR_LANGS); do tesseract --list-langs 2>/dev/null | grep -qx "$$lang" || missing="$$missing tesseract-ocr-$$lang"; done; \
	command -v tesseract >/dev/null || missing="tesseract-ocr$$missing"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) || echo "Tesseract could not be installed ($$missing): Trawl runs without OCR"; \
	  else echo "Tesseract missing and not root ($$missing): Trawl runs without OCR (scanned documents are found by name only)"; fi; fi

# Compressed RAR members are read through an external tool (rarfile): Debian's bsdtar is installed
# when we are root; without one, RAR member lists are still indexed and the members say why not.
rartool:
	@missing=""; command -v bsdtar >/dev/null || missing="libarchive-tools"; \
	command -v unar >/dev/null || command -v unrar >/dev/null || missing="$$missing unar"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) || echo "$$missing could not be installed: compressed (bsdtar) or encrypted (unar) RAR members will not be read"; \
	  else echo "Not root, so not installed: $$missing (bsdtar reads compressed RAR members, unar encrypted ones)"; fi; fi

# Redis and PostgreSQL for the tests: started when the machine has them but they are not running.
services:
	@$(BIN)/python tests/services.py

# ruff format --check: the layout is checked like the rules (run `ruff format` to fix it)
lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The UI's languages (docs/ui.md, "Languages"): collect the marked strings of templates/ and
# webapp/ui/ into translations/messages.pot, merge them into each messages.po (translate the new
# or changed ones: msgstr "" or `#, fuzzy`), and compile the .mo files the app reads. The .mo
# files are committed, so a clone runs without this step; tests/test_i18n.py fails while a .po
# lags behind the templates or a .mo behind its .po.
translations: install
	$(BIN)/pybabel extract -F babel.cfg -k _l --no-location --sort-output --omit-header \
	  -o translations/messages.pot .
	$(BIN)/pybabel update -i translations/messages.pot -d translations --no-fuzzy-matching --ignore-obsolete --ignore-pot-creation-date
	$(BIN)/pybabel compile -d translations --statistics

bench: install-dev assets
	$(BIN)/python -m bench.run

bench-quick: install-dev assets
	$(BIN)/python -m bench.run --quick

# Ranking quality on the CISI collection through the service, beside a plain BM25 reference.
bench-relevance: install assets
	$(BIN)/python -m bench.relevance

clean:
	rm -rf $(VENV) node_modules $(VENDOR) .pytest_cache
