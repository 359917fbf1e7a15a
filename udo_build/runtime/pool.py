"""Runs over many inputs on every core: worker processes whose results come back in input order,
so that whatever is merged from them is what one process would have made, bit for bit.

    for index, figures in ordered(job, feeds, cores=ctx.cores, count=len(listing.inferences)):
        merge(figures)                   # input 0, 1, 2, ... whatever the worker count

A `Job` has `start()` (what every input needs: sessions, built once per process) and
`work(index, item)` (one input; its return value is the result). A `work` that is a generator
asks the coordinator: each `(topic, question)` it yields goes to `scan(index, topic, question)`
here, and the answer is sent back into it. On each topic the questions are taken in input
order: input k's once every input before it has asked on that topic or ended (each input asks
at most once per topic, and the inputs a worker holds run in input order, so the lowest input
not done is never kept waiting). Calibration asks that way, tensor by tensor as the inference
makes them, for the histogram range of input k, which follows from the ranges of the inputs
before it (udo_build.quant.calibrate).

Workers: `workers_for(cores, count)` processes, forked where the platform allows (they inherit
the job, started once here before the fork: no model is loaded again), else spawned (the job is
pickled and started in each; a job that cannot be pickled runs here). Fewer than MIN_INPUTS
inputs, or one core, run here, in order: starting workers would cost more than it saves.

BLAS: every inference of a job runs on ONE BLAS thread, here and in each worker, whatever the
worker count. OpenBLAS's results change with its thread count (ResNet-50: every tensor differs in
its last bits between 1 and 2 threads), so a fixed count is what makes the results independent
of the worker count; the cores go to workers instead, and workers x 1 <= cores.

Failures: the results of the inputs before a failing one come first, then its error, as one
process would raise it (the lowest failing index wins when several fail at once), naming the
input (`label(index)`), with the worker's traceback as its cause; the workers are stopped. A
worker that dies (killed, out of memory) is a `WorkerLost` naming its input. Ctrl-C: the workers
ignore SIGINT (a terminal sends it to the whole group); this process stops them and re-raises.
A worker whose parent dies is killed by the kernel (Linux), or ends at its pipe's end.

Memory: items are read as they are handed out, at most WINDOW per worker beyond the first
result not yet handed back; a worker holds AHEAD items at most.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import traceback
from collections import deque
from collections.abc import Callable, Generator, Hashable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Generic, TypeVar

from ..errors import StepFailed, UserError

MIN_INPUTS = 3  # fewer inputs run in this process
AHEAD = 2  # items a worker holds (the next is there when it finishes one)
WINDOW = 4  # items per worker handed out beyond the first result not yet handed back

T = TypeVar("T")
R = TypeVar("R")


class Job(Generic[T, R]):
    """What a run over many inputs does with each (see the module docstring)."""

    def start(self) -> None:
        """Build what every input needs (once per process)."""

    def work(self, index: int, item: T) -> R | Generator[tuple[Hashable, Any], Any, R]:
        raise NotImplementedError

    def scan(self, index: int, topic: Hashable, question: Any) -> Any:
        """The answer to input `index`'s question on `topic` (called here, in input order on
        each topic)."""
        raise NotImplementedError(f"{type(self).__name__} asks but has no scan")


class Each(Job[T, R]):
    """A job of one function of (index, item), with nothing to start."""

    def __init__(self, fn: Callable[[int, T], R]) -> None:
        self.fn = fn

    def work(self, index: int, item: T) -> R:
        return self.fn(index, item)


class WorkerLost(StepFailed):
    """A worker process ended without a result (killed, out of memory): the machine's fault,
    the step's failure."""

    def __init__(self, message: str) -> None:
        super().__init__("workers", message)


def labels(what: str, file: Any = None, lines: Sequence[int] = ()) -> Callable[[int], str]:
    """How errors name input i: "<what> <i>", and "(line L of FILE)" where the list is known."""
    def label(index: int) -> str:
        if file is None or index >= len(lines):
            return f"{what} {index}"
        return f"{what} {index} (line {lines[index]} of {file})"

    return label


def available_cores() -> int:
    """The cores this process may run on (its affinity where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def start_method() -> str | None:
    """fork where the platform has it and it is safe (not macOS, and no gRPC in this process:
    its core's threads do not survive a fork, and a forked child can abort in its poller, as
    one did in a process whose remote-cache channels were open), else spawn; None: neither."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and sys.platform != "darwin" and "grpc" not in sys.modules:
        return "fork"
    return "spawn" if "spawn" in methods else None


def workers_for(cores: int, count: int | None) -> int:
    """How many worker processes `ordered` starts for `count` inputs (1: none, in here)."""
    import multiprocessing

    if count is None or count < MIN_INPUTS or cores < 2 or start_method() is None:
        return 1
    if multiprocessing.current_process().daemon:  # a daemon may not start processes
        return 1
    return min(cores, count)


def ordered(job: Job[T, R], items: Iterable[T], cores: int, count: int | None,
            label: Callable[[int], str] = lambda i: f"input {i}") -> Iterator[tuple[int, R]]:
    """(index, result) of every item, in input order, computed over `cores` cores (see the
    module docstring); `count`: the number of items (None: unknown, run here)."""
    workers = workers_for(cores, count)
    method = start_method()
    payload = None
    if workers > 1 and method == "spawn":
        try:
            payload = pickle.dumps(job)
        except Exception:  # closures, user kernels loaded from a file: this process runs it
            workers = 1
    from ..kernels.blas import blas_threads  # numpy's: imported where a job runs, not before

    with blas_threads(1):
        if workers == 1:
            yield from _here(job, items, label)
        else:
            if method == "fork":
                job.start()
            yield from _Pool(job, workers, method or "fork", payload, label).run(items)


def _here(job: Job[T, R], items: Iterable[T], label: Callable[[int], str]
          ) -> Iterator[tuple[int, R]]:
    job.start()
    index = 0  # the input being read or run
    try:
        for item in items:
            yield index, _drive(job.work(index, item), partial(job.scan, index))
            index += 1
    except (UserError, StepFailed) as exc:
        raise _naming(exc, label(index)) from None


def _drive(outcome: Any, ask: Callable[[Hashable, Any], Any]) -> Any:
    """The result of one `work`: a plain value, or a generator that asks, `(topic, question)`
    at a time, and is sent each answer."""
    if not isinstance(outcome, Generator):
        return outcome
    try:
        topic, question = next(outcome)
        while True:
            topic, question = outcome.send(ask(topic, question))
    except StopIteration as stop:
        return stop.value


def _naming(exc: BaseException, where: str) -> BaseException:
    """The error as the user's step failing at input `where` (a bug of udo-build: as it is)."""
    if isinstance(exc, StepFailed) and where not in exc.message:
        return StepFailed(exc.step, f"{where}: {exc.message}", inputs=exc.inputs)
    if isinstance(exc, UserError) and not any(where in p.message for p in exc.problems):
        return UserError(problems=[replace(p, message=f"{where}: {p.message}")
                                   for p in exc.problems])
    return exc


class _RemoteTraceback(Exception):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"\n(in the worker)\n{self.text}"


class _Pool(Generic[T, R]):
    """The coordinator: hands items out in input order, answers questions in input order,
    hands results back in input order."""

    def __init__(self, job: Job[T, R], workers: int, method: str, payload: bytes | None,
                 label: Callable[[int], str]) -> None:
        self.job, self.size, self.method, self.payload = job, workers, method, payload
        self.label = label
        self.conns: list[Any] = []  # None: a lost worker's
        self.procs: list[Any] = []
        self.held: list[deque[int]] = []  # per worker: the indices it holds, in order
        self.results: dict[int, Any] = {}
        self.failed: dict[int, tuple[BaseException, str]] = {}
        self.asked: dict[int, tuple[int, Hashable, Any]] = {}  # index -> (worker, topic, q)
        self.topics: set[tuple[Hashable, int]] = set()  # (topic, input) answered, not returned
        self.asked_by: dict[int, list[Hashable]] = {}  # input -> the topics it asked on
        self.handed = 0  # the next index to hand out
        self.returned = 0  # the next index to hand back
        self.exhausted = False

    def run(self, items: Iterable[T]) -> Iterator[tuple[int, R]]:
        source = iter(items)
        finished = False  # else a failure, Ctrl-C or the caller giving up: no waiting
        try:
            for _ in range(self.size):  # each starts on its items while the next is forked
                self._start_one()
                self._hand_out(source)
            while True:
                while self.returned in self.results:
                    yield self.returned, self.results.pop(self.returned)
                    self.returned += 1
                if self.returned in self.failed:
                    self._raise(self.returned)
                if self.exhausted and self.returned >= self.handed:
                    finished = True
                    return
                self._hand_out(source)
                if self.exhausted and self.returned >= self.handed or self.returned in self.failed:
                    continue  # the end found (or an input failing) with nothing out: not waited on
                self._receive()
        finally:
            self._stop(finished)

    def _start_one(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context(self.method)
        here, there = context.Pipe()
        target = (self.job, None) if self.method == "fork" else (None, self.payload)
        proc = context.Process(target=_serve, args=(*target, there), daemon=True,
                               name="udo-build-pool")
        with sigint_blocked():  # a Ctrl-C comes after it is known here, to be stopped
            proc.start()
            self.conns.append(here)
            self.procs.append(proc)
            self.held.append(deque())
        there.close()

    def _hand_out(self, source: Iterator[T]) -> None:
        limit = self.returned + WINDOW * len(self.conns)
        live = [w for w in range(len(self.conns)) if self.conns[w] is not None]
        while live and not self.exhausted and not self.failed and self.handed < limit:
            worker = min(live, key=lambda w: len(self.held[w]))
            if len(self.held[worker]) >= AHEAD:
                return
            try:
                item = next(source)
            except StopIteration:
                self.exhausted = True
                return
            except Exception as exc:  # reading input `handed` failed: raised in its turn
                self.failed[self.handed] = (exc, "")
                self.exhausted = True
                return
            self.conns[worker].send(("work", self.handed, item))
            self.held[worker].append(self.handed)
            self.handed += 1

    def _receive(self) -> None:
        from multiprocessing.connection import wait

        live = [conn for conn in self.conns if conn is not None]
        if not live:
            raise WorkerLost("every worker ended before the last inputs were done")
        if not any(self.held[w] for w in range(len(self.conns)) if self.conns[w] is not None):
            # nothing is out, so nothing can come back: a bug of this coordinator, said
            # with its state rather than waited on for ever
            raise RuntimeError(
                f"the worker pool waits with no input out: handed {self.handed}, returned "
                f"{self.returned}, results {sorted(self.results)}, failed {sorted(self.failed)}, "
                f"asked {sorted(self.asked)}, exhausted {self.exhausted}")
        for conn in wait(live):
            worker = self.conns.index(conn)
            try:
                message = conn.recv()
            except (EOFError, OSError):
                self._lost(worker)
                continue
            if message[0] == "ask":
                self.asked[message[1]] = (worker, message[2], message[3])
            else:
                index = self.held[worker].popleft()
                if message[0] == "done":
                    self.results[index] = message[2]
                else:
                    self.failed[index] = (message[2], message[3])
            self._answer()

    def _answer(self) -> None:
        """Answer the questions whose turn has come: input k's on a topic once every input
        before it asked on that topic, finished or failed (a worker asks one at a time, so
        few wait)."""
        answered = True
        while answered:
            answered = False
            for k in sorted(self.asked):
                worker, topic, question = self.asked[k]
                if all((topic, j) in self.topics or self._ended(j)
                       for j in range(self.returned, k)):
                    del self.asked[k]
                    self.topics.add((topic, k))
                    self.asked_by.setdefault(k, []).append(topic)
                    answer = self.job.scan(k, topic, question)
                    if self.conns[worker] is not None:  # else lost since it asked
                        self.conns[worker].send(("answer", answer))
                    answered = True
        for j in [j for j in self.asked_by if j < self.returned]:  # handed back: ended
            self.topics.difference_update((topic, j) for topic in self.asked_by.pop(j))

    def _ended(self, index: int) -> bool:
        return index < self.returned or index in self.results or index in self.failed

    def _lost(self, worker: int) -> None:
        proc = self.procs[worker]
        proc.join(5.0)  # its pipe closed: it is ending
        held = self.held[worker]
        index = held[0] if held else self.handed
        self.failed.setdefault(index, (WorkerLost(
            f"{self.label(index)}: the worker running it ended (exit code {proc.exitcode}): "
            "killed, or out of memory?"), ""))
        self.conns[worker].close()
        self.conns[worker] = None

    def _raise(self, index: int) -> None:
        exc, trace = self.failed[index]
        named = _naming(exc, self.label(index))
        if trace:
            raise named from _RemoteTraceback(trace)
        raise named

    def _stop(self, finished: bool) -> None:
        """Let idle workers end, or end them at once (mid-inference) when the run did not
        finish."""
        for conn in self.conns if finished else ():
            if conn is not None:
                with contextlib.suppress(OSError, ValueError):
                    conn.send(("stop",))
        for proc in self.procs if finished else ():
            proc.join(2.0)
        alive = [proc for proc in self.procs if proc.is_alive()]
        for proc in alive:
            proc.terminate()
        for proc in alive:
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self.conns:
            if conn is not None:
                conn.close()


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Ctrl-C (SIGINT) blocked in here, and in every process started in here (the mask is
    inherited through fork and exec): a worker starts with it blocked (it then ignores it), and
    only the coordinator answers. A Ctrl-C meanwhile waits until the block ends."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    old = mask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, old)


def _serve(job: Job[Any, Any] | None, payload: bytes | None, conn: Any) -> None:
    """A worker: items in, results out, until told to stop or its parent goes. A thread reads
    what comes in while the worker computes or sends: a big result going out while a big item
    comes in never blocks both ends."""
    import queue
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:
        try:
            while True:
                inbox.put(conn.recv())
        except (EOFError, OSError):
            inbox.put(("stop",))

    # What the items need is imported before the reader thread starts unpickling them: two
    # threads importing numpy at once fail ("partially initialized module"), as a spawned
    # worker, which imports everything afresh, did in one of seven starts.
    from ..kernels.blas import blas_threads  # numpy

    spawned = job is None
    if spawned:  # the job comes pickled (importing its modules), and starts below
        job = pickle.loads(payload or b"")
    threading.Thread(target=read, name="udo-build-pool-inbox", daemon=True).start()
    with blas_threads(1):
        if spawned:
            job.start()
        waiting: deque[Any] = deque()
        while True:
            message = waiting.popleft() if waiting else inbox.get()
            if message[0] != "work":
                return
            _serve_one(job, message[1], message[2], conn, inbox, waiting)


def _serve_one(job: Job[Any, Any], index: int, item: Any, conn: Any, inbox: Any,
               waiting: deque[Any]) -> None:
    def ask(topic: Hashable, question: Any) -> Any:
        conn.send(("ask", index, topic, question))
        while True:
            message = inbox.get()
            if message[0] == "answer":
                return message[1]
            if message[0] == "stop":
                raise SystemExit(0)
            waiting.append(message)

    try:
        result = _drive(job.work(index, item), ask)
        conn.send(("done", index, result))
    except (SystemExit, BrokenPipeError):
        raise
    except BaseException as exc:
        conn.send(("failed", index, _portable(exc), traceback.format_exc()))


def _portable(exc: BaseException) -> BaseException:
    """The exception, or a RuntimeError saying what it was where it does not pickle."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
