"""Sessions passed from one engine's clients to the next's: a warm-up's to its run's (Handoff).

Its own module, apart from the Python engine that gives and takes them, so that the load a run is
made of (runner.load.model.Load) can name it without loading that engine: a run the native engine
sends (it refuses a warm-up) needs none of it (issue 34).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.load.transport import Session


class Handoff:
    """Sessions passed from one engine's clients to the next's: a warm-up's to its run's.

    So the run goes on over the connections its warm-up opened (their set-up, a proxy's
    handshake, is the warm-up's, not interval 0's), each client taking over its own. A client
    of the run waits for its session until the warm-up's client is done with it (its last
    request answered), as it would have waited for that request; a session whose taker is
    gone (the run stopped first) is closed by the giver.

    `taken`, when set, is told of each session taken: the protocols of the connections it
    brings (Session.held) and when it was free, so that the run counts them as its own.
    """

    def __init__(self) -> None:
        self._given: dict[int, asyncio.Future[tuple[Session, int]]] = {}
        self.taken: Callable[[list[str], int], None] | None = None

    def _future(self, client: int) -> asyncio.Future[tuple[Session, int]]:
        if client not in self._given:
            self._given[client] = asyncio.get_running_loop().create_future()
        return self._given[client]

    async def give(self, client: int, session: Session, free_ns: int) -> None:
        """Hand client `client`'s session on; `free_ns`: when its last request ended."""
        future = self._future(client)
        if future.done():  # its taker was cancelled while waiting: nobody will close it but us
            await close_session(session)
            return
        future.set_result((session, free_ns))

    async def take(self, client: int) -> tuple[Session, int]:
        """Client `client`'s session, once given, and when its last request ended."""
        session, free_ns = await self._future(client)
        if self.taken is not None:
            self.taken(session.held(), free_ns)
        return session, free_ns


async def close_session(session: Session) -> None:
    """Close a client's session; a transport's bug while closing is no reason to end the run.

    Every send of the client has been counted by then, so nothing measured is lost by
    going on; an exception here would instead end the whole run as an error.
    """
    try:
        await session.aclose()
    except Exception:  # noqa: BLE001 - see above
        pass
