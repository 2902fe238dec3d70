"""The answer a blocking send waits for (producer._Answer): settled once, on another thread."""

from __future__ import annotations

import threading

import pytest

from broker.client.errors import MQClientError
from broker.client.producer import _Answer


def test_the_waiting_thread_gets_the_result_settled_on_another_thread():
    answer = _Answer()
    result = object()
    threading.Timer(0.05, answer.settle, (result, None)).start()
    assert answer.wait() is result


def test_an_error_is_raised_in_the_waiting_thread_and_only_the_first_settling_counts():
    answer = _Answer()
    error = MQClientError("refused")
    answer.settle(None, error)
    answer.settle(object(), None)  # a late second settling (a retry's) changes nothing
    with pytest.raises(MQClientError) as raised:
        answer.wait()
    assert raised.value is error
