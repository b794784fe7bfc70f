"""Settings of the bare floor of bench/web_load.py: Django with no app, no middleware and no
database, one JSON view (bench/web_urls.py). What the ASGI server and Django's handler cost a
request by themselves, to set `POST /jobs`'s CPU against."""

SECRET_KEY = "bench-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.web_urls"
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True
