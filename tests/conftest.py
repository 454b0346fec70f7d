"""Run ``async def`` tests with ``asyncio.run`` (no plugin needed), each bounded to 20 s.

Every async test runs on a fresh event loop; timing decisions inside use a virtual clock, so the
bound is a safety net against a hang, never a timing assertion.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from hypothesis import settings

# Property tests check what happens, not how fast: no per-example deadline on a busy CI machine.
settings.register_profile("flowtide", deadline=None)
settings.load_profile("flowtide")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args: dict[str, Any] = {
        name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames
    }

    async def bounded() -> None:
        await asyncio.wait_for(pyfuncitem.obj(**args), 20)

    asyncio.run(bounded())
    return True
