# The README's commands. `make demo` brings the whole app up on SQLite with the offline demo
# services; `make test` runs every test (on SQLite, or on the database DATABASE_URL names) and
# builds the docs strictly; `make docs` builds the site of docs/ into site/.
PY := .venv/bin/python
# The import-linter contracts in pyproject.toml (the engine's layers); no cache left in the tree.
LINT_IMPORTS := .venv/bin/lint-imports --no-cache --no-logo
STAMP := .venv/.installed
# No "MkDocs 2" banner on every build (NO_MKDOCS_2_WARNING). Not --quiet: it hides the warnings
# that --strict counts, so a broken link would pass.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
# `make demo PORT=8010 DEMO_PORT=8011`: the web server's and the offline demo services' ports.
PORT ?= 8000
DEMO_PORT ?= 8001

.PHONY: demo test lint typecheck bench install docs

$(STAMP): requirements.txt
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) manage.py quickstart --via-make --port $(PORT) --demo-port $(DEMO_PORT)

test: $(STAMP)
	$(PY) -m ruff check .
	$(LINT_IMPORTS)
	$(MKDOCS)
	$(PY) -m pytest --create-db -q

# The documentation site (mkdocs.yml) into site/, git-ignored. --strict: a broken link or anchor,
# or a docstring mkdocstrings cannot read, fails the build; `make test` runs the same build.
docs: $(STAMP)
	$(MKDOCS)

lint: $(STAMP)
	$(PY) -m ruff check .
	$(LINT_IMPORTS)
	$(PY) -m ruff format --check .

# mypy with django-stubs over workflows/ (config in pyproject.toml; its cache stays under .venv/).
typecheck: $(STAMP)
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) bench/engine.py
