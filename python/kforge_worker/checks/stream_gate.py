"""A CUDA stream held until the host lets it go: the driver's stream wait on a device word (cuStreamWaitValue32)
that the host sets, from a stream of its own, when it chooses. check_cuda_profile holds the caller's stream this
way while a forward is queued, so whatever the forward puts on other streams without ordering it after the caller's
runs before anything the caller's stream does next — whatever the host's speed. A timed sleep kernel held it
before, and a host slower than its estimate (a loaded machine, the profiler) let unjoined side work slip through
(adv_side_stream, device run 140)."""

from __future__ import annotations

import ctypes
import threading

import torch

_CU_STREAM_WAIT_VALUE_GEQ = 0x0


def _driver_wait() -> ctypes._CFuncPtr | None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    for name in ("cuStreamWaitValue32_v2", "cuStreamWaitValue32"):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
            fn.restype = ctypes.c_int
            return fn
    return None


class StreamGate:
    """``hold(stream)`` queues the wait (False when the driver refuses: the caller holds the stream another way);
    ``release()`` lets it go; a watchdog releases it after ``limit_s`` in any case, so a forward that itself waits
    for the held stream (a synchronising call) is delayed, never deadlocked."""

    def __init__(self, device: torch.device, limit_s: float = 5.0) -> None:
        self._wait = _driver_wait()
        self._flag = torch.zeros(1, dtype=torch.int32, device=device)
        self._releaser = torch.cuda.Stream(device)
        self._limit_s = limit_s
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._released = True

    def hold(self, stream: torch.cuda.Stream) -> bool:
        if self._wait is None:
            return False
        self._flag.zero_()
        torch.cuda.synchronize(self._flag.device)  # the zero lands before the wait reads it
        if self._wait(ctypes.c_void_p(stream.cuda_stream), self._flag.data_ptr(), 1, _CU_STREAM_WAIT_VALUE_GEQ) != 0:
            return False
        self._released = False
        self._timer = threading.Timer(self._limit_s, self.release)
        self._timer.daemon = True
        self._timer.start()
        return True

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
            with torch.cuda.stream(self._releaser):
                self._flag.fill_(1)
        if self._timer is not None and threading.current_thread() is not self._timer:
            self._timer.cancel()
