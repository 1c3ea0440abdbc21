"""Talking to a dask scheduler the user named: checked address, one timeout on every call.

A dask cluster runs xlaprof's per-host worker and sends back each host's summary. By default
``distributed`` moves results with pickle, and unpickling runs whatever code the bytes name. So
the worker's task answers with plain bytes (``xlaprof.inputs.pod.plain``: JSON, its tables
Parquet), and the client here (``_plain_client``) reads what workers send with msgpack only
(``deserializers=["msgpack"]``: a result or an error a worker pickled is refused, not loaded),
takes no pickled type from a finished task and subscribes to no worker's pickled warnings or
prints. An answer that is not a summary is a ``SchedulerError``.

What this cannot change: ``distributed``'s own protocol unpickles any part of any message
marked as pickled, so a *scheduler* that is hostile (or a worker that takes it over) can still
run code here. xlaprof therefore uses a cluster only when the user asked for it
(``--scheduler``, or ``$XLAPROF_DASK_SCHEDULER``, which is announced on stderr every time it is
used). Name only a scheduler you trust (docs/pod-scale.md, docs/security.md).

What the user named is checked before anything connects (``address``): ``tcp://`` or
``tls://`` host and port, or a bare ``host:port``; ``inproc://``, ``ucx://``, ``http://`` and
anything else are a ``SchedulerError`` (one line, exit 25). Every client call (connect, the
worker count, closing) runs under one timeout (``$XLAPROF_DASK_TIMEOUT``, 20 s by default): a
listener that never answers, or a scheduler with no workers, ends in a ``SchedulerError``
instead of a hang. Results may take as long as the hosts take, as long as workers are there:
when none arrives for a whole timeout, the scheduler is asked whether it still has workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from xlaprof.errors import SchedulerError, XlaprofError
from xlaprof.model.request import DEFAULT_TIMEOUT_S, SCHEDULER_ENV, TIMEOUT_ENV

__all__ = ["DEFAULT_TIMEOUT_S", "SCHEDULER_ENV", "TIMEOUT_ENV", "address", "chosen", "run"]
_ADDRESS = re.compile(
    r"(?:(?P<scheme>tcp|tls)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r":(?P<port>[0-9]{1,5})"
)


def address(text: str) -> str:
    """``text`` as a dask scheduler address (``tcp://`` added to a bare ``host:port``), or a
    ``SchedulerError`` saying what is accepted."""
    match = _ADDRESS.fullmatch(text.strip())
    if match is None or not 0 < int(match["port"]) < 65536:
        from xlaprof.escape import terminal

        raise SchedulerError(
            f"{terminal(text)!r} is not a dask scheduler address; give tcp://HOST:PORT, "
            "tls://HOST:PORT or HOST:PORT (inproc://, ucx:// and http:// are not accepted)"
        )
    return f"{match['scheme'] or 'tcp'}://{match['host']}:{match['port']}"


def chosen(scheduler: str | None, from_env: str | None = None) -> str | None:
    """The scheduler to use: ``scheduler`` (the command line), else the environment's
    (``from_env``: ``PodSettings.env_scheduler``, read at the edge), announced on stderr (a
    variable set once and forgotten must not send work, and unpickle results, silently).
    Checked with ``address``."""
    if scheduler:
        return address(scheduler)
    if not from_env:
        return None
    checked = address(from_env)
    print(
        f"xlaprof: using the dask scheduler {checked} from ${SCHEDULER_ENV} (dask's protocol "
        "trusts the scheduler: unset it unless you trust that cluster)",
        file=sys.stderr,
    )
    return checked


def run(
    scheduler: str,
    function: Callable[..., Any],
    items: Sequence[str],
    keywords: dict[str, Any],
    done: Callable[[int, Any, BaseException | None], None],
    limit: float = DEFAULT_TIMEOUT_S,
) -> int:
    """``function(item, **keywords)`` for each item on the cluster at ``scheduler``; ``done``
    gets (index, result, error) as each finishes; ``limit``: the timeout of every client call,
    in seconds (``PodSettings.timeout_s``). Returns the number of workers."""
    try:
        from distributed import Client
    except ImportError:
        raise XlaprofError(
            "--scheduler needs dask.distributed: pip install 'xlaprof[pod]'"
        ) from None
    return asyncio.run(
        _run(_plain_client(Client), scheduler, function, items, keywords, done, limit)
    )


def _plain_client(client_class: Any) -> Any:
    """``distributed.Client`` reading nothing a worker pickled: results with msgpack only, no
    pickled type of a finished task, no pickled warning or print event."""

    class PlainClient(client_class):  # type: ignore[misc]  # distributed's Client: untyped base
        # "print"/"warn" events carry pickles: not subscribed to
        _default_event_handlers: ClassVar[dict[str, Any]] = {}

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["deserializers"] = ["msgpack"]
            super().__init__(*args, **kwargs)

        def _handle_key_in_memory(
            self, key: Any = None, type: Any = None, workers: Any = None
        ) -> None:
            # the result's type comes pickled from the worker: not loaded
            super()._handle_key_in_memory(key=key, type=None, workers=workers)

    return PlainClient


async def _run(
    client_class: Any,
    scheduler: str,
    function: Callable[..., Any],
    items: Sequence[str],
    keywords: dict[str, Any],
    done: Callable[[int, Any, BaseException | None], None],
    limit: float,
) -> int:
    try:
        client = await asyncio.wait_for(
            client_class(scheduler, asynchronous=True, timeout=limit, set_as_default=False),
            limit,
        )
    except (OSError, TimeoutError) as error:
        reason = str(error) or f"no answer within {limit:g} s"
        raise SchedulerError(f"{scheduler}: no dask scheduler answers ({reason})") from None
    try:
        workers = await _workers(client, scheduler, limit)
        if not workers:
            try:
                await asyncio.wait_for(client.wait_for_workers(1, timeout=limit), limit * 1.5)
            except (TimeoutError, OSError):
                raise SchedulerError(
                    f"{scheduler}: the scheduler has no workers (waited {limit:g} s; set "
                    f"${TIMEOUT_ENV} to wait longer)"
                ) from None
            workers = await _workers(client, scheduler, limit)
        futures = client.map(function, list(items), pure=False, **keywords)
        pending = {asyncio.ensure_future(_result(f)): i for i, f in enumerate(futures)}
        while pending:
            finished, _ = await asyncio.wait(
                pending, timeout=limit, return_when=asyncio.FIRST_COMPLETED
            )
            if not finished and not await _workers(client, scheduler, limit):
                raise SchedulerError(f"{scheduler}: the scheduler lost its workers")
            for task in finished:
                index = pending.pop(task)
                result, failure = task.result()
                done(index, result, failure)
        return workers
    finally:
        with contextlib.suppress(Exception):  # closing is best effort: the results are in
            await asyncio.wait_for(client.close(), limit)


async def _result(future: Any) -> tuple[Any, BaseException | None]:
    try:
        return await future, None
    except Exception as error:  # the host's failure, named by the caller
        return None, error


async def _workers(client: Any, scheduler: str, limit: float) -> int:
    try:
        return len(await asyncio.wait_for(client.nthreads(), limit))
    except (OSError, TimeoutError) as error:
        reason = str(error) or f"no answer within {limit:g} s"
        raise SchedulerError(f"{scheduler}: the scheduler stopped answering ({reason})") from None
