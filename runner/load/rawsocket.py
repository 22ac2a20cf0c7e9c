"""Plain TCP for the fast transport, on sockets of its own: cheaper connections, and the
kernel's receive timestamp of every response.

Why not the event loop's transports: without keep-alive every request is a new
connection, and uvloop's create_connection costs a transport object, a waiter Future, a
connection_made callback and about a dozen syscalls (getsockname three times, getpeername,
getpid twice, a setsockopt, epoll_ctl through io_uring) before the request is written.
And it reads with read(), which cannot say when the bytes arrived: a response that waited
while the loop was busy would count the wait as the server's. Here a connection is a
non-blocking socket in one epoll set per loop (the Pump, which the loop watches as one
file descriptor), connected the way ab does it (connect, then connect again to learn that
it is done, which on loopback it nearly always is), written with send() and read with
recvmsg(), whose SCM_TIMESTAMPNS says when the kernel received the last segment read.

RawTransport drives the same Protocol (runner.load.http1.Connection) as an asyncio
transport would, so everything about HTTP stays in one place. TLS goes through the event
loop's transports (start_tls needs one); so does anything not on Linux.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import socket
import struct
import sys
from typing import Any

# SO_TIMESTAMPNS (and the SCM_TIMESTAMPNS control message it adds) on Linux; Python's socket
# module does not name it.
SO_TIMESTAMPNS = 35
AVAILABLE = sys.platform == "linux" and hasattr(select, "epoll")
_READ_SIZE = 65536  # under glibc's mmap threshold: a larger buffer cost an mmap and an munmap per read
_CONTROL_SIZE = socket.CMSG_SPACE(16) if AVAILABLE else 0
_TIMESPEC = struct.Struct("@qq")
_IN, _OUT = (select.EPOLLIN, select.EPOLLOUT) if AVAILABLE else (1, 4)
_CONNECTED = (0, errno.EISCONN)
_CONNECTING = (errno.EINPROGRESS, errno.EALREADY)


class Pump:
    """One epoll set for the raw sockets of a loop, watched by the loop as one descriptor.

    Registering a descriptor with the loop itself (add_reader) cost uvloop a poll handle,
    an ioctl and three epoll_ctl calls, two of them failing, per connection; here it is one
    epoll_ctl, and closing the socket takes it out of the set.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._epoll = select.epoll()
        self._sockets: dict[int, RawTransport | asyncio.Future[None]] = {}
        loop.add_reader(self._epoll.fileno(), self._ready)

    def add(self, fd: int, owner: RawTransport | asyncio.Future[None], events: int) -> None:
        self._sockets[fd] = owner
        self._epoll.register(fd, events)

    def modify(self, fd: int, owner: RawTransport | asyncio.Future[None], events: int) -> None:
        self._sockets[fd] = owner
        self._epoll.modify(fd, events)

    def remove(self, fd: int) -> None:
        """Stop watching a socket that stays open (one that reads nothing for now)."""
        self._sockets.pop(fd, None)
        self._epoll.unregister(fd)

    def forget(self, fd: int) -> None:
        """Before the socket closes (which takes it out of the epoll set)."""
        self._sockets.pop(fd, None)

    def _ready(self) -> None:
        sockets = self._sockets
        for fd, events in self._epoll.poll(0, 1024):
            owner = sockets.get(fd)
            if owner is None:
                continue
            if isinstance(owner, RawTransport):
                owner.ready(events)
            elif not owner.done():  # a connect in progress: writable means it is done
                owner.set_result(None)

    async def connect(self, family: int, address: tuple[Any, ...], keep_alive: bool) -> socket.socket:
        """A connected non-blocking socket to `address`, stamping what it receives; OSError if refused."""
        sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            if keep_alive:  # a request written while an earlier one's ACK is pending must not wait
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            error = sock.connect_ex(address)
            if error in _CONNECTING:
                error = sock.connect_ex(address)  # done already? (on loopback, nearly always)
            if error in _CONNECTING:
                await self._writable(sock.fileno())
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error not in _CONNECTED:
                raise OSError(error, os.strerror(error))
        except BaseException:
            sock.close()
            raise
        return sock

    async def _writable(self, fd: int) -> None:
        waiter: asyncio.Future[None] = self.loop.create_future()
        self.add(fd, waiter, _OUT)
        try:
            await waiter
        finally:
            self.forget(fd)
            self._epoll.unregister(fd)


class RawTransport(asyncio.Transport):
    """A connected socket in the Pump, driving an asyncio Protocol as the loop's transports do.

    `stamp_ns` is the kernel's receive time (CLOCK_REALTIME, ns) of the last segment of the
    last read, 0 when the kernel gave none.
    """

    def __init__(self, pump: Pump, sock: socket.socket, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._pump = pump
        self._sock = sock
        self._fd = sock.fileno()
        self._protocol = protocol
        self._unsent = b""
        self._closing = False
        self._paused = False
        self._watched = True
        self.stamp_ns = 0
        pump.add(self._fd, self, _IN)
        protocol.connection_made(self)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        if self._unsent:
            self._unsent += data
            return
        try:
            sent = self._sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._lose(exc)
            return
        if sent < len(data):
            self._unsent = bytes(data[sent:])
            self._watch()

    def pause_reading(self) -> None:
        """Read nothing until resume_reading(): the protocol has work to finish first (a body to hash).

        The socket leaves the Pump's epoll set meanwhile (unless a write is left): epoll reports
        a hang-up whatever it is asked for, so a peer that closed would wake the Pump at every
        turn of the loop until reading resumes. The hang-up is read once reading resumes.
        """
        if not self._closing and not self._paused:
            self._paused = True
            self._watch()

    def resume_reading(self) -> None:
        if not self._closing and self._paused:
            self._paused = False
            self._watch()

    def _watch(self) -> None:
        """Tell the Pump what to wake this transport for: reads unless paused, writes while some are left."""
        events = (0 if self._paused else _IN) | (_OUT if self._unsent else 0)
        if events and not self._watched:
            self._pump.add(self._fd, self, events)
        elif events:
            self._pump.modify(self._fd, self, events)
        elif self._watched:
            self._pump.remove(self._fd)
        self._watched = bool(events)

    def ready(self, events: int) -> None:
        if events & _OUT and self._unsent:
            self._flush()
        if events & ~_OUT and not self._closing and not self._paused:  # readable, hung up, or an error
            self._read()

    def _flush(self) -> None:
        try:
            sent = self._sock.send(self._unsent)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lose(exc)
            return
        self._unsent = self._unsent[sent:]
        if not self._unsent:
            self._watch()

    def _read(self) -> None:
        try:
            data, control, _, _ = self._sock.recvmsg(_READ_SIZE, _CONTROL_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(exc)
            return
        if not data:
            self._lose(None)  # the server closed: as asyncio does when eof_received() returns None
            return
        if control:
            seconds, nanoseconds = _TIMESPEC.unpack_from(control[0][2])
            self.stamp_ns = seconds * 1_000_000_000 + nanoseconds
        self._protocol.data_received(data)

    def _lose(self, exc: Exception | None) -> None:
        if self._closing:
            return
        self._closing = True
        self._pump.forget(self._fd)
        self._sock.close()
        self._pump.loop.call_soon(self._protocol.connection_lost, exc)

    def close(self) -> None:
        """Close at once: the client closes only after a whole response, when nothing is left to send."""
        self._lose(None)

    def abort(self) -> None:
        self._lose(None)

    def is_closing(self) -> bool:
        return self._closing

    def get_write_buffer_size(self) -> int:
        """Bytes written but not yet handed to the kernel."""
        return len(self._unsent)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return None if self._closing else self._sock
        return default
