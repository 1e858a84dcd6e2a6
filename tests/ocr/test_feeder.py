"""The read-ahead thread between a lazy page stream and an engine loop."""

from __future__ import annotations

import threading
import time

import pytest

from chandra_ocr.ocr.feeder import Feeder


def test_items_arrive_in_order_then_the_end():
    feed = Feeder(iter(range(5)), size=2)
    got = []
    while (item := feed.get(block=True)) is not None:
        got.append(item)
    assert got == [0, 1, 2, 3, 4] and feed.done and feed.get(block=True) is None


def test_a_non_blocking_get_returns_none_while_the_stream_is_slow():
    release = threading.Event()

    def slow():
        release.wait(10)
        yield "page"

    feed = Feeder(slow(), size=1)
    assert feed.get(block=False) is None and not feed.done
    release.set()
    assert feed.get(block=True) == "page"


def test_an_error_in_the_stream_is_raised_in_the_consumer():
    def broken():
        yield 1
        raise ValueError("render failed")

    feed = Feeder(broken(), size=4)
    assert feed.get(block=True) == 1
    with pytest.raises(ValueError, match="render failed"):
        feed.get(block=True)
    assert feed.get(block=True) is None


def test_close_stops_pulling_and_closes_the_generator():
    closed = threading.Event()

    def endless():
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.set()

    feed = Feeder(endless(), size=2)
    assert feed.get(block=True) == 0
    feed.close()
    for _ in range(3):  # drain what was queued so the thread sees the stop
        feed.get(block=False)
        time.sleep(0.15)
    assert closed.wait(5)


def test_several_threads_prepare_items_at_once_and_each_arrives_once():
    together = threading.Barrier(3, timeout=10)  # broken (and raised here) unless 3 prepare at once

    def prepare(n):
        if n < 3:
            together.wait()
        return (n, threading.current_thread().name)

    feed = Feeder(iter(range(20)), size=4, prepare=prepare, threads=3)
    got = []
    while (item := feed.get(block=True)) is not None:
        got.append(item)
    assert sorted(n for n, _ in got) == list(range(20))
    assert {name for _, name in got} <= {"page-feed-0", "page-feed-1", "page-feed-2"}


def test_with_several_threads_an_error_is_raised_and_close_closes_the_generator():
    closed = threading.Event()

    def broken():
        try:
            yield from range(3)
            raise ValueError("render failed")
        finally:
            closed.set()

    feed = Feeder(broken(), size=8, threads=2)
    with pytest.raises(ValueError, match="render failed"):
        while feed.get(block=True) is not None:
            pass
    assert feed.done and closed.wait(5)

    def endless():
        try:
            yield from iter(int, 1)
        finally:
            closed.set()

    closed.clear()
    feed = Feeder(endless(), size=2, threads=3)
    assert feed.get(block=True) == 0
    feed.close()
    for _ in range(3):
        feed.get(block=False)
        time.sleep(0.15)
    assert closed.wait(5)
