"""The retry policy: the backoff formula of DESIGN §2 and the retry decision."""

import pytest

from workflows.core.retry import RetryPolicy


def test_backoff__base_2_waits_4_8_16_up_to_the_cap():
    policy = RetryPolicy(max_retries=6, backoff_base=2.0, backoff_max=60.0)
    assert [policy.delay_for(n) for n in range(1, 7)] == [4, 8, 16, 32, 60, 60]


def test_backoff__defaults_are_the_seeds():
    policy = RetryPolicy()
    assert policy.max_retries == 3 and policy.delay_for(1) == pytest.approx(0.2)
    assert policy.retry_on_timeout is False


def test_decide__max_retries_6_means_7_attempts():
    policy = RetryPolicy(max_retries=6)
    assert all(policy.decide(a, "error").will_retry for a in range(1, 7))
    final = policy.decide(7, "error")
    assert not final.will_retry and final.kind == "exhausted"


def test_decide__critical_never_retries():
    decision = RetryPolicy(max_retries=5).decide(1, "critical")
    assert not decision.will_retry and decision.kind == "critical"


def test_decide__timeout_retries_only_when_asked():
    assert RetryPolicy().decide(1, "timeout").kind == "timeout"
    assert RetryPolicy(retry_on_timeout=True).decide(1, "timeout").will_retry


def test_decide__retry_after_overrides_backoff():
    decision = RetryPolicy(backoff_base=2.0).decide(1, "error", retry_after=7.5)
    assert decision.will_retry and decision.delay == 7.5


def test_remaining_retries():
    policy = RetryPolicy(max_retries=3)
    assert [policy.remaining_after(a) for a in (1, 2, 3, 4)] == [3, 2, 1, 0]


def test_negative_retries_rejected():
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)
