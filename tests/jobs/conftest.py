"""Fixtures of the AI job's tests: the demo services in-process (an httpx2 MockTransport over
the same code `manage.py demoservices` serves), and a way to submit and run jobs."""

from __future__ import annotations

import pytest

from jobs.demo.services import DemoServices
from jobs.demo.transport import mock_transport
from jobs.samples import SAMPLE_PATH
from jobs.services.http import use_transport
from workflows import conf

SAMPLE = SAMPLE_PATH.read_text()
SAMPLE_COMPANIES = ["Northwind Logistics Group", "Initech Systems", "Acme Corp"]


@pytest.fixture
def demo(settings):
    """The demo model, CRM and CMS, answering every HTTP call the job's steps make."""
    settings.OPENAI_BASE_URL = "http://demo.test/v1"
    settings.OPENAI_API_KEY = "demo-key"
    settings.OPENAI_MODEL = "demo"
    settings.CRM_API_URL = "http://demo.test/crm"
    settings.CMS_API_URL = "http://demo.test/cms"
    services = DemoServices()
    with use_transport(mock_transport(services)):
        yield services


@pytest.fixture
def start_fails_after_writing(monkeypatch):
    """The store writes a job's run and start message, then the call fails (as a connection lost
    before the caller's transaction commits): what else that transaction wrote must go too."""
    from workflows.storage.django import DjangoStore

    real_start = DjangoStore.get_or_create_run

    def broken_after_the_start(self, *args, **kwargs):
        real_start(self, *args, **kwargs)
        raise RuntimeError("database went away")

    monkeypatch.setattr(DjangoStore, "get_or_create_run", broken_after_the_start)


@pytest.fixture
def job_registry(settings):
    """The example's workflows as the registry the API and pages serve, whatever the suite set."""
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["jobs.workflows.registry"]}
    conf.registry.cache_clear()
    yield
    conf.registry.cache_clear()
