"""The store's value adapters (`values.t`, `values.j`, `values.rid`) skip Django's per-call connection lookup;
they must give exactly what Django's own adapters give, on whichever database the suite runs."""

from __future__ import annotations

import datetime as dt
import uuid
import zoneinfo

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from workflows.models import Run
from workflows.storage.django import values

pytestmark = pytest.mark.django_db

DATETIMES = [
    None,
    dt.datetime(2026, 12, 3, 15, 4, 5, 123456, tzinfo=dt.UTC),
    dt.datetime(2026, 12, 3, 15, 4, 5, tzinfo=dt.UTC),  # no microseconds: Django's text has none
    dt.datetime.fromisoformat("1999-01-01T00:00:00+00:00"),  # parsed from text: UTC as well
    dt.datetime(2026, 6, 1, 9, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),  # not UTC: Django's path
    dt.datetime(2026, 6, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
]


@pytest.mark.parametrize("value", DATETIMES, ids=str)
def test_a_datetime_is_adapted_as_django_adapts_it(value):
    assert values.t(value) == connection.ops.adapt_datetimefield_value(value)


@pytest.mark.parametrize("value", [None, 7, "text", {"a": [1, 2.5, None, True]}, [], "é\u2603"], ids=repr)
def test_a_json_value_is_adapted_as_django_adapts_it(value):
    ours, django = values.j(value), (None if value is None else connection.ops.adapt_json_value(value, None))
    if connection.vendor == "postgresql":  # psycopg's Jsonb wrappers: compare what they hold
        assert (ours is None and django is None) or (type(ours) is type(django) and ours.obj == django.obj)
    else:
        assert ours == django


@pytest.mark.parametrize(
    "value",
    ["6f1c1d1e-8a2b-4c3d-9e4f-0a1b2c3d4e5f", "6F1C1D1E8A2B4C3D9E4F0A1B2C3D4E5F", uuid.uuid4()],
    ids=str,
)
def test_a_run_id_is_stored_as_django_stores_it(value):
    assert values.rid(value) == Run._meta.pk.get_db_prep_value(value, connection)


def test_a_malformed_run_id_gets_djangos_error():
    with pytest.raises(ValidationError):
        values.rid("not-a-uuid")
