"""Every engine case of tests/unit (engine, flow, store failures, lost events) again, over the Django store and a
real database."""

from tests.unit.test_children import *  # noqa: F403
from tests.unit.test_concurrency import *  # noqa: F403
from tests.unit.test_engine import *  # noqa: F403
from tests.unit.test_flow import *  # noqa: F403
from tests.unit.test_idempotency_key import *  # noqa: F403
from tests.unit.test_limiters import *  # noqa: F403
from tests.unit.test_lost_events import *  # noqa: F403
from tests.unit.test_store_failures import *  # noqa: F403
