"""The bare floor's ASGI app (bench/web_settings.py): Django's ASGI handler and nothing else."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.web_settings")
application = get_asgi_application()
