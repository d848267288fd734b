"""The judge: the verdict-critical comparisons made in the clean reference process, reported to the CLI.

The worker (the candidate's process) compares the candidate's outputs with the reference's, but everything in it
is one class lookup away from candidate code: tolerances, compare functions, the sampler, the result itself. So
the clean reference process (reference_process.py, which never imports candidate code) makes the same
comparisons again with what it holds itself, and writes its own judgement records on a channel the worker cannot
write: a socket the CLI hands the worker as an extra descriptor (``options.judgeFd``), which the worker passes to
the reference process at spawn and closes before the candidate is imported.

What the judge compares (its own state, never values the worker sends after the candidate exists):
- every correctness trial: the candidate's outputs, handed over after its call, against the judge's own
  reference outputs and float64 evaluation for the trial's inputs, with the tolerance it fixed from the spec (the
  request's override, written before the import), the problem's KFORGE_ATOL/RTOL or the dtypes' default — the
  trial's pass mark (compare.compare_output), as the worker's;
- the timed calls: after every pair the worker hands over the candidate's outputs of that pair (a commitment:
  the judge copies them into its own memory), and only then does the judge draw, with its own random generator,
  whether the pair is compared (against its own last output for the same inputs, with the allowance its own
  trials measured). Nothing about the draw exists before the candidate's outputs are in the judge's memory, so a
  candidate that answers wrong only when it is not looked at cannot know when that is — even one that sends
  requests to the reference process itself (a second hand-over of a pair is a failure).

Tensors from the worker are copied, never mapped as code, never unpickled: CPU files are read with ``pread`` into
the judge's own buffer (a file truncated meanwhile is a short read, not a SIGBUS), CUDA IPC allocations copied
device to device; dtype, shape and size are checked against the judge's own outputs first, and a file inside the
judge's own shared directory (its reference outputs) is refused.

Records: one JSON object per line, ``{"type": "judge", "nonce", "seq", "event", ...}``; the nonce is the first line
the CLI writes into the socket (the worker never reads it). ``reconcile`` is the CLI's rule (src/worker/judge.ts
is the CLI's own copy; this one serves the corpus runner and the tests).
"""

from __future__ import annotations

import json
import math
import os
import random
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

# How often a pair of timed calls is compared (as timed_inputs.OutputSampler: every one of the first few, then a
# floor). The judge compares in its own process, outside both timed regions.
SAMPLE_C = 6.0
SAMPLE_FLOOR = 0.2


class JudgeInputError(Exception):
    """What the worker handed over cannot be read as the candidate's outputs (why: said in the record)."""


class Judge:
    """The reference process's side: reads its nonce, judges, writes records."""

    def __init__(self, fd: int, own_directory: str | None = None, rng: random.Random | None = None) -> None:
        self.fd = fd
        self.nonce = _read_nonce(fd)
        self.seq = 0
        self.own_directory = os.path.realpath(own_directory) if own_directory else None
        self.rng = rng or random.Random(int.from_bytes(os.urandom(8), "little"))
        self.atol: float | None = None
        self.rtol: float | None = None
        self.noise = 0.0
        # The reference's own relative L2 error vs float64 per output, the worst over the trials (compare.
        # timed_precision_bound): a timed output of get_inputs() values is held to the precision check's rule.
        self.reference_error: dict[int, float] = {}
        self.tf32 = False  # whether the reference may round fp32 to TF32 (the reference process says, at its start)
        self.trials_given = 0
        self.trials_judged = 0
        self.trials_failed = 0
        self.pending: dict[str, Any] | None = None  # the last trial's outputs, until the candidate's are judged
        self.calls = 0
        self.timed_ms: list[float] = []  # the reference's timed calls, as measured here
        self.cand_ms: list[float] = []  # the candidate's, as handed over with each timed pair's outputs
        self.after_candidate: list[bool] = []  # whether each timed call came right after the candidate's
        self.commits = 0
        self.committed_call = 0
        self._last_call_timed = False
        self.sampled = 0
        self.wrong = 0
        self.failures: list[str] = []
        self.mode = "process"
        self.why: str | None = None
        self.marks: Any = None  # clock_marks.Reader: kernel-stamped marks around each timed candidate call
        self.windows: list[float] = []
        self.marked_ms: list[float] = []
        self.ended = False
        self._cuda: dict[tuple[str, int], Any] = {}
        # At once, before this process imports torch or the problem (the worker imports torch, then the candidate,
        # after spawning it): a run whose channel holds no line at all had no judge, never a judge killed early.
        self.record("hello", pid=os.getpid(), nonceRead=self.nonce is not None)

    # -- the channel ---------------------------------------------------------------------------
    def record(self, event: str, **fields: Any) -> None:
        message = {"type": "judge", "nonce": self.nonce or "", "seq": self.seq, "event": event, **fields}
        self.seq += 1
        data = (json.dumps(message, allow_nan=False, default=str) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            pass  # the CLI went away: nothing left to report to

    def start(self, pid: int, dropout: bool) -> None:
        if dropout:
            self.mode, self.why = "in_worker", "the reference has active dropout (random by design)"
        self.record("start", pid=pid, mode=self.mode, why=self.why)

    def declined(self, why: str) -> None:
        if self.mode == "process":
            self.mode, self.why = "in_worker", why
            self.record("declined", why=why)

    def clock_marks(self, fd: int) -> None:
        from .clock_marks import Reader

        try:
            self.marks = Reader(fd)
        except OSError:
            self.marks = None

    def fail(self, what: str) -> None:
        if len(self.failures) < 20:
            self.failures.append(what)
        self.record("failure", what=what)

    # -- trials --------------------------------------------------------------------------------
    def tolerance(self, spec: dict[str, Any], problem: Any, dtypes: list[Any]) -> None:
        """The trials' pass mark, fixed at the first trial as the worker's tolerance_for does — from the spec (the
        request's override, written before the candidate existed), the problem, or the dtypes."""
        if self.atol is not None:
            return
        from .compare import default_tolerance

        default = default_tolerance(dtypes)
        self.atol = float(spec.get("atol") or getattr(problem, "KFORGE_ATOL", None) or default)
        self.rtol = float(spec.get("rtol") or getattr(problem, "KFORGE_RTOL", None) or default)
        self.record("tolerance", atol=self.atol, rtol=self.rtol)

    def trial_ready(self, seed: int, outs: list[Any], outs64: list[Any] | None, rows: Any) -> None:
        """The judge's own outputs of a trial (private: what the worker maps are copies), kept until judged."""
        if self.pending is not None:
            self.fail(f"trial {self.pending['trial']}: the candidate's outputs were never handed over")
        self.pending = {"trial": self.trials_given, "seed": seed, "outs": outs, "outs64": outs64, "rows": rows}
        self.trials_given += 1

    def judge_trial(self, items: Any, device: Any) -> None:
        from .compare import compare_output, error_stats, reference_worst_error, rows_of

        pending, self.pending = self.pending, None
        if pending is None:
            self.fail("candidate outputs handed over for a trial the judge did not give (or twice for one)")
            return
        t = pending["trial"]
        refs, refs64, rows = pending["outs"], pending["outs64"], pending["rows"]
        if refs64 is not None and len(refs64) != len(refs):
            refs64 = None
        passed, message = True, None
        try:
            cands = self.receive(items, refs, device)
        except JudgeInputError as exc:
            passed, message = False, str(exc)
        else:
            for k, (c, r) in enumerate(zip(cands, refs)):
                verdict = compare_output(k, c, r, refs64[k] if refs64 else None, float(self.atol or 1e-4),
                                         float(self.rtol or 1e-4), rows)
                if not verdict.passed:
                    passed, message = False, verdict.message
                    break
        if refs64 is not None:
            import torch

            for k, (r, r64) in enumerate(zip(refs, refs64)):
                r = rows_of(r, rows)
                if isinstance(r, torch.Tensor) and r.is_floating_point() and r.shape == r64.shape:
                    worst = reference_worst_error(r, r64)
                    if math.isfinite(worst):
                        self.noise = max(self.noise, worst)
                    rel = error_stats(r, r64).rel_l2
                    if rel is not None and math.isfinite(rel):
                        self.reference_error[k] = max(self.reference_error.get(k, 0.0), rel)
        self.trials_judged += 1
        self.trials_failed += 0 if passed else 1
        self.record("trial", trial=t, seed=pending["seed"], passed=passed, message=_short(message))

    # -- timed calls ---------------------------------------------------------------------------
    def timing_starts(self) -> None:
        """The allowance for comparisons without float64 is what the judge's own trials measured."""
        from .compare import set_reference_noise

        set_reference_noise(self.noise)

    def called(self, ms: float | None = None) -> None:
        self.calls += 1
        self._last_call_timed = ms is not None
        if ms is not None:
            self.timed_ms.append(float(ms))
            from .timing import candidate_first

            self.after_candidate.append(candidate_first(self.calls - 1))

    def probability(self, pair: int) -> float:
        return min(1.0, max(SAMPLE_C / (pair + 1), SAMPLE_FLOOR))

    def commit(self, items: Any, last: list[Any] | None, device: Any, cand_ms: Any = None,
               varied: bool = False, float64: Callable[[], Any] | None = None) -> None:
        """The candidate's outputs of the pair just run (and its time, in a timed pair): copied first, then the draw,
        then (maybe) the comparison with the judge's own last output for the same inputs. A pair whose inputs were
        off the distribution (varied) is always compared, for rows far off (compare.compare_timed), those judged
        against ``float64()`` (this process's float64 evaluation of the pair's inputs, made only on such a miss)."""
        from .compare import compare_timed, rounding_against, timed_precision_bound

        pair = self.calls - 1
        if self.calls == 0 or last is None:
            self.fail("timed outputs handed over before any timed reference call")
            return
        if self.committed_call == self.calls:
            self.fail(f"pair {pair}: timed outputs handed over twice")
            return
        self.committed_call = self.calls
        self.commits += 1
        self._candidate_time(pair, cand_ms)
        try:
            cands = self.receive(items, last, device)
        except JudgeInputError as exc:
            cands, problem = None, str(exc)
        else:
            problem = None
        if self.rng.random() >= self.probability(pair) and not varied:
            if problem is None:
                return
        self.sampled += 1
        ok, message = problem is None, problem
        atol, rtol = float(self.atol or 1e-4), float(self.rtol or 1e-4)
        if cands is not None:
            rounding = rounding_against(float64) if varied and float64 is not None else None
            for k, (c, r) in enumerate(zip(cands, last)):
                bound = timed_precision_bound(self.reference_error.get(k), r.dtype, self.tf32)
                passed, why = compare_timed(k, c, r, atol, rtol, varied, bound, rounding)
                if not passed:
                    ok, message = False, why
                    break
        if not ok:
            self.wrong += 1
        if not ok or self.sampled <= 400:
            self.record("sample", pair=pair, ok=ok, message=_short(message))

    def _candidate_time(self, pair: int, ms: Any) -> None:
        """Kept as handed over, right after the pair: the result's candidate times and speedup must be these (the
        worker's list and statistics are reachable from candidate code; what it hands over after the call is not
        rewritten later). A timed pair (the reference's call was timed) comes with a duration, a warm-up pair
        without."""
        timed = self._last_call_timed
        if ms is None:
            if timed:
                self.fail(f"pair {pair}: a timed pair handed over without the candidate's time")
            return
        if not timed:
            self.fail(f"pair {pair}: a candidate time handed over for an untimed pair")
            return
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
            self.fail(f"pair {pair}: the candidate's time handed over is not a duration ({str(ms)[:40]})")
            return
        self.cand_ms.append(float(ms))
        if self.marks is not None:
            from .clock_marks import window_ms

            window, why = window_ms(self.marks.drain())
            if why is not None:
                self.fail(f"pair {pair}: {why}")
            elif window is not None:
                self.windows.append(window)
                self.marked_ms.append(float(ms))

    # -- the end -------------------------------------------------------------------------------
    def end(self, last_findings: Callable[[], list[str]] | None = None) -> None:
        """last_findings: failures found after the judge's own last imports (the end's statistics), the last of this
        process's code to load (reference_process._loaded_code_rewritten)."""
        if self.ended:
            return
        self.ended = True
        if self.pending is not None:
            self.fail(f"trial {self.pending['trial']}: the candidate's outputs were never handed over")
            self.pending = None
        if self.commits != self.calls:
            self.fail(f"{self.calls - self.commits} of {self.calls} pairs of timed calls had no candidate outputs "
                      "handed over")
        lingering = order_effect(self.timed_ms, self.after_candidate)
        if lingering is not None:
            self.fail(lingering)
        if self.marks is not None:
            from .clock_marks import clock_finding

            slow = clock_finding(self.windows, self.marked_ms)
            if slow is not None:
                self.fail(slow)
        median = cand_median = speedup = None
        if self.timed_ms:
            from .stats import speedup as timing_speedup
            from .stats import summarize as timing_summary

            median = timing_summary(self.timed_ms)["medianMs"]  # the worker's own statistic, on the same numbers
            if self.cand_ms:
                cand_median = timing_summary(self.cand_ms)["medianMs"]
                speedup = timing_speedup(self.timed_ms, self.cand_ms) if len(self.cand_ms) == len(self.timed_ms) \
                    else None
        for why in last_findings() if last_findings is not None else []:
            self.fail(why)
        self.record("end", mode=self.mode, why=self.why, trialsGiven=self.trials_given,
                    trialsJudged=self.trials_judged, trialsFailed=self.trials_failed, calls=self.calls,
                    commits=self.commits, sampled=self.sampled, wrong=self.wrong, failures=self.failures,
                    refTimed=len(self.timed_ms), refMedianMs=median, candTimed=len(self.cand_ms),
                    candMedianMs=cand_median, speedup=speedup,
                    tolerance=None if self.atol is None else {"atol": self.atol, "rtol": self.rtol})

    # -- reading the candidate's outputs -------------------------------------------------------
    def receive(self, items: Any, refs: list[Any], device: Any) -> list[Any]:
        """The candidate's flattened outputs, copied into this process, each checked against the judge's own
        output of the same index (count, shape; dtype differences are the comparison's to name)."""
        import torch

        if not isinstance(items, list):
            raise JudgeInputError("the candidate's outputs were not handed over as a list")
        if len(items) != len(refs):
            raise JudgeInputError(f"ModelNew returned {len(items)} output tensor(s), Model {len(refs)}")
        out = []
        for k, (item, ref) in enumerate(zip(items, refs)):
            desc = item.get("tensor") if isinstance(item, dict) else None
            if not isinstance(desc, dict):
                why = item.get("why") if isinstance(item, dict) else None
                raise JudgeInputError(f"output {k}: not handed over as a tensor" + (f" ({why})" if why else ""))
            dtype = _dtype(desc.get("dtype"))
            shape = desc.get("shape")
            if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
                raise JudgeInputError(f"output {k}: no valid shape")
            if tuple(shape) != tuple(ref.shape):
                raise JudgeInputError(f"output {k}: shape {shape} vs reference {list(ref.shape)}")
            numel = math.prod(shape)
            if desc.get("numel") != numel:
                raise JudgeInputError(f"output {k}: {desc.get('numel')} elements declared for shape {shape}")
            nbytes = numel * torch.empty((), dtype=dtype).element_size()
            kind = desc.get("kind")
            if numel == 0:
                t = torch.empty(shape, dtype=dtype, device=ref.device)
            elif kind == "file":
                t = self._read_file(desc.get("path"), nbytes, dtype).reshape(shape).to(ref.device)
            elif kind == "cuda_ipc" and getattr(device, "type", "cpu") == "cuda":
                t = self._read_cuda(desc, numel, nbytes, dtype, ref.device).reshape(shape)
            else:
                raise JudgeInputError(f"output {k}: transport {kind!r} is not this run's")
            out.append(t)
        return out

    def _read_file(self, path: Any, nbytes: int, dtype: Any) -> Any:
        import torch

        if not isinstance(path, str):
            raise JudgeInputError("no file named")
        real = os.path.realpath(path)
        if self.own_directory and (real == self.own_directory or real.startswith(self.own_directory + os.sep)):
            raise JudgeInputError(f"the candidate's outputs named the reference process's own file ({real})")
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise JudgeInputError(f"cannot open the candidate's outputs: {exc.strerror}") from None
        try:
            import stat

            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise JudgeInputError("the candidate's outputs are not a regular file")
            buf = bytearray(nbytes)
            view, got = memoryview(buf), 0
            while got < nbytes:
                n = os.preadv(fd, [view[got:]], got)
                if n <= 0:
                    raise JudgeInputError(f"the candidate's outputs file holds {got} bytes, {nbytes} expected")
                got += n
        finally:
            os.close(fd)
        return torch.frombuffer(buf, dtype=torch.uint8).view(dtype)

    def _read_cuda(self, desc: dict[str, Any], numel: int, nbytes: int, dtype: Any, device: Any) -> Any:
        """A copy, on the judge's device, of an allocation the worker shared by CUDA IPC (its staging buffer for the
        candidate's outputs: one handle for the whole run, opened once)."""
        import base64

        import torch

        ipc = desc.get("ipc")
        if not isinstance(ipc, dict):
            raise JudgeInputError("no IPC handle")
        try:
            handle = base64.b64decode(ipc["handle"])
            size, offset, storage_offset = int(ipc["sizeBytes"]), int(ipc["offsetBytes"]), int(ipc["storageOffset"])
            item = torch.empty((), dtype=dtype).element_size()
            if storage_offset < 0 or (storage_offset * item + nbytes) > size:
                raise JudgeInputError("the IPC allocation is smaller than the outputs it should hold")
            # One cudaMalloc segment (one handle) holds several of the caching allocator's blocks: each output's
            # staging buffer is a (handle, offset) pair, and the handle alone gave output 1 output 0's bytes.
            key = (ipc["handle"], int(ipc["device"]), offset, size)
            storage = self._cuda.get(key)
            if storage is None:
                storage = torch.UntypedStorage._new_shared_cuda(
                    int(ipc["device"]), handle, size, offset,
                    base64.b64decode(ipc["refCounterHandle"]) if ipc.get("refCounterHandle") else None,
                    int(ipc["refCounterOffset"]),
                    base64.b64decode(ipc["eventHandle"]) if ipc.get("eventHandle") else None,
                    bool(ipc["eventSyncRequired"]))
                # One per output staging buffer of the worker (a handle for the whole run); a buffer the worker grew
                # is a new handle: the oldest are let go.
                while len(self._cuda) >= 16:
                    self._cuda.pop(next(iter(self._cuda)))
                self._cuda[key] = storage
            typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)
            shared = torch._utils._rebuild_tensor(typed, storage_offset, (numel,), (1,))
            own = torch.empty(numel, dtype=dtype, device=device)
            own.copy_(shared)
            torch.cuda.synchronize(device)
            return own
        except JudgeInputError:
            raise
        except Exception as exc:  # noqa: BLE001 — a bad handle is the worker's failure to hand over, said
            raise JudgeInputError(f"cannot copy the candidate's outputs from CUDA IPC: {type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


# The pairs alternate which side goes first (timing.candidate_first): a reference call right after the candidate's
# and one right after the worker's own housekeeping should take the same time, give or take a hot device (1-1.5%).
ORDER_RATIO = 1.5
ORDER_FLOOR_MS = 0.05
ORDER_MIN_CALLS = 8


def order_effect(timed_ms: list[float], after_candidate: list[bool]) -> str | None:
    """Why the reference's timed calls right after the candidate's were slower than the others, or None. Work the
    candidate leaves running when its call returns (a kernel on a stream of its own, a spinning handler or thread)
    overlaps the reference's next call only when that call comes right after it: the worker synchronises the
    device and hands the outputs over before the pairs where the reference goes first."""
    import statistics

    after = [ms for ms, c in zip(timed_ms, after_candidate) if c]
    other = [ms for ms, c in zip(timed_ms, after_candidate) if not c]
    if min(len(after), len(other)) < ORDER_MIN_CALLS:
        return None
    # Most of the calls right after the candidate's slower than most of the others: a shared device's bimodal noise,
    # which falls on both kinds of call alike, moves one median but not the quartiles apart.
    slow, usual = statistics.quantiles(after, n=4)[0], statistics.quantiles(other, n=4)[2]
    if slow > ORDER_RATIO * usual and slow - usual > ORDER_FLOOR_MS:
        return (f"three quarters of the reference's timed calls right after the candidate's took over {slow:.4g} ms, "
                f"{slow / usual:.2f}x what three quarters of the others stayed under ({usual:.4g} ms): work of the "
                "candidate's still ran when its call had returned")
    return None


def _dtype(name: Any) -> Any:
    import torch

    value = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(value, torch.dtype):
        raise JudgeInputError(f"unknown dtype {name!r}")
    return value


def _short(message: str | None, limit: int = 300) -> str | None:
    return None if message is None else message[:limit]


def _read_nonce(fd: int, timeout: float = 30.0) -> str | None:
    """The first line the CLI wrote into the socket (at once, when it started the worker); None if none came."""
    data = b""
    try:
        while b"\n" not in data and len(data) < 200:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 200 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    line = data.split(b"\n", 1)[0].decode("ascii", errors="replace").strip()
    return line or None


# ------------------------------------------------------------------------------------ the caller's side
class JudgeChannel:
    """For a process that starts a worker (the corpus runner, the fork server, tests): a socket pair, one end
    for the worker (``child_fd``, handed over as ``options.judgeFd``), the other read here in a thread."""

    def __init__(self, read_now: bool = True) -> None:
        self.nonce = os.urandom(16).hex()
        self.ours, theirs = socket.socketpair()
        self.child_fd = theirs.detach()
        self.child_closed = False
        self.ours.sendall((self.nonce + "\n").encode())
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        if read_now:  # a fork server starts reading after its fork (no thread of its own in the child)
            self._thread.start()

    def start_reading(self) -> None:
        if not self._thread.is_alive() and self._thread.ident is None:
            self._thread.start()

    def _read(self) -> None:
        buf = b""
        try:
            while True:
                chunk = self.ours.recv(65536)
                if not chunk:
                    break
                buf += chunk
                *done, buf = buf.split(b"\n")
                self.lines.extend(d.decode("utf-8", errors="replace") for d in done)
        except OSError:
            pass
        if buf:
            self.lines.append(buf.decode("utf-8", errors="replace"))

    def close_child_end(self) -> None:
        """Closes this process's copy of the worker's end (after spawning the worker). A pipeline run in this very
        process closes it itself (spawn_reference): say so with ``child_closed`` — the number may be reused."""
        if not self.child_closed:
            self.child_closed = True
            try:
                os.close(self.child_fd)
            except OSError:
                pass

    def finish(self, timeout: float = 15.0) -> list[str]:
        """The lines written, once every holder of the other end has closed it (or after ``timeout``)."""
        self.close_child_end()
        self._thread.join(timeout)
        try:
            self.ours.close()
        except OSError:
            pass
        return list(self.lines)


def summarize(lines: list[str], nonce: str) -> dict[str, Any]:
    """The judge's record (the protocol's JudgeRecord) from its lines, with what is wrong with the channel."""
    record: dict[str, Any] = {"channel": "ok", "problems": [], "mode": None, "why": None, "pid": None,
                              "tolerance": None, "trials": [], "sampled": 0, "samples": [], "end": None}
    seen = 0
    for raw in lines:
        if not raw.strip():
            continue
        try:
            message = json.loads(raw)
        except ValueError:
            record["problems"].append(f"not JSON: {raw[:120]}")
            continue
        if not isinstance(message, dict) or message.get("type") != "judge":
            record["problems"].append(f"not a judge record: {raw[:120]}")
            continue
        if message.get("nonce") != nonce:
            record["problems"].append(f"a record without this run's nonce: {raw[:120]}")
            continue
        if message.get("seq") != seen:
            record["problems"].append(f"record {message.get('seq')} where {seen} was next (duplicated or lost)")
        seen = int(message.get("seq", seen)) + 1 if isinstance(message.get("seq"), int) else seen + 1
        event = message.get("event")
        if event == "hello":
            record["pid"] = message.get("pid")
        elif event == "start":
            record["mode"], record["why"] = message.get("mode"), message.get("why")
        elif event == "tolerance":
            record["tolerance"] = {"atol": message.get("atol"), "rtol": message.get("rtol")}
        elif event == "declined":
            record["mode"], record["why"] = "in_worker", message.get("why")
        elif event == "trial":
            record["trials"].append({k: message.get(k) for k in ("trial", "seed", "passed", "message")})
        elif event == "sample":
            record["sampled"] += 1
            if not message.get("ok"):  # the right ones are counted, not listed
                record["samples"].append({k: message.get(k) for k in ("pair", "ok", "message")})
        elif event == "end":
            if record["end"] is not None:
                record["problems"].append("two end records")
            record["end"] = {k: message.get(k) for k in ("trialsGiven", "trialsJudged", "trialsFailed", "calls",
                                                          "commits", "sampled", "wrong", "failures", "refTimed",
                                                          "refMedianMs", "candTimed", "candMedianMs", "speedup")}
            record["mode"], record["why"] = message.get("mode"), message.get("why")
    if not any(raw.strip() for raw in lines):
        record["channel"] = "missing"
    elif record["problems"] or record["pid"] is None:
        record["channel"] = "forged"
        if not record["problems"]:
            record["problems"].append("records without the judge's first one")
    elif record["end"] is None:
        record["channel"] = "truncated"
    return record


def judgement_failure(record: dict[str, Any], result: dict[str, Any], warmup: int) -> tuple[str, str] | None:
    """(verdict, evidence) when the judge's record contradicts a result that says correct; else None."""
    if record["channel"] == "forged":
        return "cheating", f"the judge's channel holds lines the judge did not write: {record['problems'][0]}"
    if result.get("verdict") != "correct":
        return None
    if record["channel"] == "missing":
        # Not one line, not even the one the reference process writes as it starts (before the worker has imported
        # torch, let alone the candidate): no judge ever ran — no reference process, or a worker of another kind. The
        # worker's verdict stands, unless the result itself says a clean reference process ran.
        isolated = ((result.get("timing") or {}).get("inputs") or {}).get("reference") == "process" or any(
            c.get("name") == "reference_isolation" and c.get("outcome") == "pass" for c in result.get("checks") or [])
        if isolated:
            return "runtime_error", ("the result says the reference ran in a clean process, but that process never "
                                     "reported: the run cannot be judged")
        return None
    if record["channel"] == "truncated":
        return "runtime_error", ("the clean process's judgement ended before the run did (no end record): the run "
                                 "cannot be judged")
    end = record["end"] or {}
    failed = next((t for t in record["trials"] if not t.get("passed")), None)
    if failed is not None:
        return "cheating", (f"the worker says correct, but in the clean process trial {failed.get('trial')} failed: "
                            f"{failed.get('message')}")
    wrong = next((s for s in record["samples"] if not s.get("ok")), None)
    if wrong is not None or int(end.get("wrong") or 0) > 0:
        what = f"pair {wrong.get('pair')}: {wrong.get('message')}" if wrong else f"{end.get('wrong')} wrong"
        return "cheating", (f"the worker says correct, but the clean process compared the candidate's timed outputs "
                            f"and found them wrong ({what})")
    if end.get("failures"):
        return "cheating", f"the worker says correct, but the clean process's judgement failed: {end['failures'][0]}"
    if record["mode"] == "process":
        trials = len(result.get("trials") or [])
        if int(end.get("trialsJudged") or 0) != trials or int(end.get("trialsGiven") or 0) != trials:
            return "cheating", (f"the worker reports {trials} passed trials, the clean process gave "
                                f"{end.get('trialsGiven')} and judged {end.get('trialsJudged')}")
        timing = result.get("timing")
        if timing is not None:
            where = (timing.get("inputs") or {}).get("reference")
            if where != "process":
                return "cheating", ("the worker timed the reference beside the candidate though the clean process "
                                    "held it (its timed outputs never reached the judge)")
            # The reference's times are measured in the clean process but reach the result through the worker.
            ref = timing.get("ref") or {}
            median = end.get("refMedianMs")
            if (end.get("refTimed") != ref.get("n") or not isinstance(median, (int, float))
                    or abs(median - float(ref.get("medianMs") or 0.0)) > 1e-9 * max(abs(median), 1e-12)):
                return "cheating", (f"the reference's times in the result ({ref.get('n')} calls, median "
                                    f"{ref.get('medianMs')} ms) are not the ones the clean process measured "
                                    f"({end.get('refTimed')} calls, median {median} ms)")
            # So are the candidate's, measured in the worker: the judge was handed each pair's time right after the
            # call and recomputes the median and the speedup (a list edited later, or statistics patched in the
            # worker, no longer match).
            cand = timing.get("cand") or {}
            if (end.get("candTimed") != cand.get("n") or not _same(end.get("candMedianMs"), cand.get("medianMs"))
                    or not _same(end.get("speedup"), timing.get("speedup"))):
                return "cheating", (f"the candidate's times in the result ({cand.get('n')} calls, median "
                                    f"{cand.get('medianMs')} ms, speedup {timing.get('speedup')}) are not the ones "
                                    f"handed to the clean process after each pair ({end.get('candTimed')} calls, "
                                    f"median {end.get('candMedianMs')} ms, speedup {end.get('speedup')})")
            pairs = int((timing.get("ref") or {}).get("n") or 0) + warmup
            if int(end.get("calls") or 0) != pairs or int(end.get("commits") or 0) != pairs:
                return "cheating", (f"the worker reports {pairs} pairs of calls (warm-up included); the clean "
                                    f"process ran {end.get('calls')} and was handed {end.get('commits')} of the "
                                    "candidate's outputs")
    return None


def _same(judged: Any, reported: Any) -> bool:
    """Equal up to float formatting; a value the judge does not have never matches."""
    if isinstance(judged, bool) or not isinstance(judged, (int, float)) or not isinstance(reported, (int, float)):
        return False
    return abs(judged - reported) <= 1e-9 * max(abs(judged), 1e-12)


def reconcile(result: dict[str, Any], lines: list[str], nonce: str, warmup: int) -> dict[str, Any]:
    """The result with the judge's record in it and, where they disagree, the judge's verdict (the CLI's rule)."""
    record = summarize(lines, nonce)
    result["judge"] = record
    failure = judgement_failure(record, result, warmup)
    if failure is not None:
        verdict, evidence = failure
        result.setdefault("checks", []).append({"name": "judge_record", "outcome": "fail", "failVerdict": verdict,
                                                "evidence": evidence})
        if result.get("verdict") in ("correct", None) or verdict == "cheating":
            result["verdict"], result["reason"] = verdict, f"judge_record: {evidence}"
    return result
