"""Answers from other threads: each settles its own awaited future, and answers given together
wake the loop once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from flowtide.threads import CANCELLED, Reply


async def test_answers_given_together_wake_the_loop_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    wakes: list[object] = []
    call_soon_threadsafe = loop.call_soon_threadsafe

    def counted(*args: Any) -> Any:
        wakes.append(args[0])
        return call_soon_threadsafe(*args)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    replies: list[Reply[int]] = [Reply(loop) for _ in range(3)]
    heard: list[str] = []
    then = Reply[int](loop, lambda: heard.append("then"))

    def answer() -> None:  # (the loop is blocked meanwhile: every answer waits for it)
        replies[0].set_result(1)
        replies[1].set_exception(ValueError("two"))
        replies[2].tell(None, CANCELLED)
        then.set_result(4)

    thread = threading.Thread(target=answer)
    thread.start()
    thread.join()
    answers = await asyncio.gather(*(r.awaited for r in replies), return_exceptions=True)
    assert answers[0] == 1
    assert isinstance(answers[1], ValueError)
    assert isinstance(answers[2], asyncio.CancelledError)
    assert await then.awaited == 4 and heard == ["then"]
    assert len(wakes) == 1


async def test_an_answer_after_the_loop_took_the_others_wakes_it_again() -> None:
    loop = asyncio.get_running_loop()
    first: Reply[int] = Reply(loop)
    second: Reply[int] = Reply(loop)
    threading.Thread(target=first.set_result, args=(1,)).start()
    assert await first.awaited == 1
    threading.Thread(target=second.set_result, args=(2,)).start()
    assert await asyncio.wait_for(second.awaited, 10.0) == 2


async def test_an_answer_nobody_waits_for_any_more_is_dropped() -> None:
    loop = asyncio.get_running_loop()
    heard: list[str] = []
    reply: Reply[int] = Reply(loop, lambda: heard.append("then"))
    reply.awaited.cancel()
    assert not reply.set_running_or_notify_cancel()
    done: Reply[int] = Reply(loop)

    def answer() -> None:
        reply.set_result(1)
        done.set_result(2)

    thread = threading.Thread(target=answer)
    thread.start()
    thread.join()
    assert await done.awaited == 2
    assert heard == ["then"]


async def test_a_failing_callback_is_reported_and_the_answers_after_it_still_go() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))

    def fails() -> None:
        raise ValueError("then")

    first: Reply[int] = Reply(loop, fails)
    second: Reply[int] = Reply(loop)

    def answer() -> None:
        first.set_result(1)
        second.set_result(2)

    thread = threading.Thread(target=answer)
    thread.start()
    thread.join()
    assert await second.awaited == 2
    assert [type(c["exception"]) for c in reported] == [ValueError]


def test_answers_for_a_closed_loop_are_dropped_not_kept() -> None:
    loop = asyncio.new_event_loop()
    replies: list[Reply[int]] = [Reply(loop) for _ in range(3)]
    loop.close()
    for i, reply in enumerate(replies):
        reply.set_result(i)  # (no error: nobody waits for it)
    assert not replies[-1].awaited.done()
    assert replies[-1].inbox.waiting == 0
