"""settled(write): without a cancel it is `await write`; a cancel (one or several, or a timeout's)
reaches the caller only once the write has ended, its result dropped; the write's own cancellation
is its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sessionledger.infrastructure.settling import settled


class Write:
    """A write that waits on a future the test settles, then records that it ended."""

    def __init__(self) -> None:
        self.gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.steps: list[str] = []

    async def __call__(self) -> str:
        self.steps.append("sent")
        answer = await self.gate
        await asyncio.sleep(0)  # a bare yield after the answer, as a driver's bookkeeping may take
        self.steps.append("stored")
        return answer


def test_without_a_cancel_it_is_the_write_itself() -> None:
    async def scenario() -> None:
        write = Write()
        write.gate.get_loop().call_soon(write.gate.set_result, "ok")
        assert await settled(write()) == "ok"

        async def failing() -> None:
            await asyncio.sleep(0)
            raise KeyError("boom")

        with pytest.raises(KeyError):
            await settled(failing())

    asyncio.run(scenario())


def test_cancels_wait_for_the_write_to_end() -> None:
    async def scenario() -> None:
        write = Write()
        task = asyncio.ensure_future(settled(write()))
        await asyncio.sleep(0)
        for _ in range(3):  # a cancel, and more while the first waits
            task.cancel()
            await asyncio.sleep(0.01)
            assert not task.done() and write.steps == ["sent"]
        write.gate.set_result("ok")
        with pytest.raises(asyncio.CancelledError):
            await task
        assert write.steps == ["sent", "stored"]
        assert not write.gate.cancelled()

    asyncio.run(scenario())


def test_a_timeout_is_raised_once_the_write_has_ended() -> None:
    async def scenario() -> None:
        for timing_out in (lambda w: asyncio.wait_for(w, 0.01), timeout_of(0.01)):
            write = Write()
            write.gate.get_loop().call_later(0.05, write.gate.set_result, "late")
            with pytest.raises(TimeoutError):
                await timing_out(settled(write()))
            assert write.steps == ["sent", "stored"]

    asyncio.run(scenario())


def timeout_of(seconds: float) -> Any:
    async def within(write: Any) -> Any:
        async with asyncio.timeout(seconds):
            return await write

    return within


def test_a_write_failing_after_the_cancel_raises_the_cancel() -> None:
    async def scenario() -> None:
        write = Write()
        task = asyncio.ensure_future(settled(write()))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)
        write.gate.set_exception(KeyError("boom"))
        with pytest.raises(asyncio.CancelledError) as raised:
            await task
        assert isinstance(raised.value.__cause__, KeyError)

    asyncio.run(scenario())


def test_the_write_cancelled_by_another_hand_is_cancelled() -> None:
    async def scenario() -> None:
        write = Write()
        task = asyncio.ensure_future(settled(write()))
        await asyncio.sleep(0)
        write.gate.cancel()  # what the write waits on, cancelled by its own side (not the caller)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert write.steps == ["sent"]

    asyncio.run(scenario())
