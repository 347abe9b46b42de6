"""A load worker: connects to a coordinator, runs its share of the load, hands back raw records.

Run ``python -m tritonkit.perf.worker --connect HOST:PORT``: ``tritonkit perf --workers N``
starts N of these on this machine, and ``--kube N`` runs one per pod of an indexed Job. The
worker is a :class:`~tritonkit.perf.loadgen.LocalLoad` driven over the wire of
:mod:`tritonkit.perf.wire`: it answers clock pings, starts a step at the coordinator's instant
(given on the worker's own clock), and returns every completed request as it was recorded.
Nothing is summarised here: the coordinator computes every figure from the union of records.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

from tritonkit._timeouts import within
from tritonkit.errors import PerfError, TritonKitError
from tritonkit.perf import wire
from tritonkit.perf.loadgen import LocalLoad, make_sender
from tritonkit.perf.saturation import LagProbe

__all__ = ["IDLE_S", "main", "run_worker"]

#: the coordinator sends a command at least once a measurement window; this much silence means
#: it is gone and the worker stops rather than load the server forever
IDLE_S = 900.0
#: a pod may start before the coordinator listens: connecting is retried this long
CONNECT_S = 120.0


async def _connect(
    host: str, port: int, deadline_s: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return await within(asyncio.open_connection(host, port), 10.0)
        except (OSError, asyncio.TimeoutError) as exc:
            if time.monotonic() > deadline:
                raise PerfError(
                    f"could not reach the perf coordinator at {host}:{port} within {deadline_s:.0f}s: {exc}",
                    hint="is `tritonkit perf --workers/--kube` running, and is its port reachable from here?",
                ) from exc
            await asyncio.sleep(0.5)


class _Session:
    """One coordinator's commands, in order, against one LocalLoad."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.load: LocalLoad | None = None
        self.starting: asyncio.Task[None] | None = None
        self.probe: LagProbe | None = None

    async def send(self, message: dict[str, Any]) -> None:
        await wire.write_frame(self.writer, message)

    async def setup(self, msg: dict[str, Any]) -> None:
        try:
            target = wire.decode_target(msg["target"])
            requests = wire.decode_requests(msg["requests"])
            load = LocalLoad(make_sender(target=target, requests=requests, conn_limit=int(msg["conn_limit"])))
            await load.open()
        except Exception as exc:  # noqa: BLE001 - any failure is the coordinator's to report
            await self.send({"op": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return
        self.load = load
        await self.send({"op": "ready"})

    async def _start_at(self, msg: dict[str, Any], load: LocalLoad) -> None:
        wait = (int(msg["at_ns"]) - time.monotonic_ns()) / 1e9
        if wait > 0:
            await asyncio.sleep(wait)
        if load.sender.target.stream:
            self.probe = LagProbe()
            self.probe.start()
        await load.start_step(
            msg["mode"], float(msg["level"]), poisson=bool(msg["poisson"]), stagger=bool(msg["stagger"])
        )

    async def drain(self) -> None:
        load = self._need_load()
        records, cpu, delayed = await load.drain()
        lags = self.probe.take() if self.probe is not None else []
        await self.send(
            {
                "op": "records",
                "records": records,
                "cpu_s": cpu,
                "delayed": delayed,
                "lags_ns": lags,
                "as_of_ns": time.monotonic_ns(),
            }
        )

    async def stop(self) -> None:
        load = self._need_load()
        if self.starting is not None:
            await self.starting
            self.starting = None
        await load.stop_step()
        if self.probe is not None:
            await self.probe.stop()
            self.probe = None
        await self.send({"op": "stopped"})

    def _need_load(self) -> LocalLoad:
        if self.load is None:
            raise PerfError("the coordinator sent a load command before a set-up")
        return self.load

    async def handle(self, msg: dict[str, Any]) -> bool:
        """Carry out one command; False when the coordinator said exit."""
        op = msg["op"]
        if op == "ping":
            await self.send({"op": "pong", "t": time.monotonic_ns()})
        elif op == "setup":
            await self.setup(msg)
        elif op == "headers":
            self._need_load().set_headers(msg["headers"])
        elif op == "start":
            self.starting = asyncio.get_running_loop().create_task(self._start_at(msg, self._need_load()))
        elif op == "drain":
            await self.drain()
        elif op == "stop":
            await self.stop()
        elif op == "exit":
            return False
        else:
            raise PerfError(f"the coordinator sent an unknown command '{op}'")
        return True

    async def close(self) -> None:
        if self.starting is not None:
            self.starting.cancel()
        if self.probe is not None:
            await self.probe.stop()
        if self.load is not None:
            await self.load.close()
        self.writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self.writer.wait_closed()


async def run_worker(host: str, port: int, *, name: str = "", connect_s: float = CONNECT_S) -> None:
    """Serve one coordinator until it says exit (or goes away: then raise)."""
    reader, writer = await _connect(host, port, connect_s)
    session = _Session(writer)
    try:
        await session.send(
            {"op": "hello", "name": name or f"{socket.gethostname()}:{os.getpid()}", "pid": os.getpid()}
        )
        while await session.handle(
            await wire.read_frame(reader, timeout_s=IDLE_S, waiting_for="the coordinator's next command")
        ):
            pass
    finally:
        await session.close()


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tritonkit.perf.worker", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--connect", required=True, metavar="HOST:PORT", help="the coordinator's address")
    parser.add_argument("--name", default="", help="how the coordinator names this worker (default host:pid)")
    parser.add_argument(
        "--connect-timeout", type=float, default=CONNECT_S, help="seconds to keep trying to connect"
    )
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """The worker's entrypoint; returns the exit status."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    host, _, port = str(args.connect).rpartition(":")
    if not host or not port.isdigit():
        sys.stderr.write(f"error: --connect '{args.connect}' is not HOST:PORT\n")
        return 2
    name = args.name or os.environ.get("TRITONKIT_WORKER_NAME", "")
    try:
        asyncio.run(run_worker(host.strip("[]"), int(port), name=name, connect_s=args.connect_timeout))
    except TritonKitError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - the worker process's entrypoint
    raise SystemExit(main())
