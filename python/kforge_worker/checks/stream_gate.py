"""A CUDA stream held until the host lets it go: the driver's stream wait (cuStreamWaitValue32) on a word of pinned
host memory that the host sets with a plain store when it chooses. check_cuda_profile holds the caller's stream this
way while a forward is queued, so whatever the forward puts on other streams without ordering it after the caller's
runs before anything the caller's stream does next — whatever the host's speed. A timed sleep kernel held it
before, and a host slower than its estimate (a loaded machine, the profiler) let unjoined side work slip through
(adv_side_stream, device run 140).

The release is a host store, never a CUDA call: a forward that synchronises while its stream is held (a copy to
pageable host memory, a solver's info check) waits inside the driver with the context's lock taken, and a kernel
launched from another thread to set a device word then waits for that lock — the two wait on each other forever."""

from __future__ import annotations

import ctypes
import threading

import torch

_CU_STREAM_WAIT_VALUE_GEQ = 0x0


def _driver() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _driver_wait(lib: ctypes.CDLL) -> ctypes._CFuncPtr | None:
    for name in ("cuStreamWaitValue32_v2", "cuStreamWaitValue32"):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
            fn.restype = ctypes.c_int
            return fn
    return None


def _device_address(lib: ctypes.CDLL, host_pointer: int) -> int | None:
    """The device's address of a word of pinned host memory (the same address under unified addressing)."""
    fn = getattr(lib, "cuMemHostGetDevicePointer_v2", None) or getattr(lib, "cuMemHostGetDevicePointer", None)
    if fn is None:
        return None
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    address = ctypes.c_uint64(0)
    if fn(ctypes.byref(address), ctypes.c_void_p(host_pointer), 0) != 0:
        return None
    return address.value


class StreamGate:
    """``hold(stream)`` queues the wait (False when the driver refuses: the caller holds the stream another way);
    ``release()`` lets it go; a watchdog releases it after ``limit_s`` in any case, so a forward that itself waits
    for the held stream (a synchronising call) is delayed, never deadlocked."""

    def __init__(self, device: torch.device, limit_s: float = 5.0) -> None:
        self._device = device
        self._wait = None
        self._address: int | None = None
        lib = _driver()
        if lib is not None:
            self._wait = _driver_wait(lib)
            with torch.cuda.device(device):
                self._word = torch.zeros(1, dtype=torch.int32, pin_memory=True)
                self._address = _device_address(lib, self._word.data_ptr())
        self._limit_s = limit_s
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._released = True

    def _store(self, value: int) -> None:
        ctypes.c_int32.from_address(self._word.data_ptr()).value = value

    def hold(self, stream: torch.cuda.Stream) -> bool:
        if self._wait is None or self._address is None:
            return False
        torch.cuda.synchronize(self._device)  # no earlier wait on the word is still pending when it is cleared
        self._store(0)
        if self._wait(ctypes.c_void_p(stream.cuda_stream), self._address, 1, _CU_STREAM_WAIT_VALUE_GEQ) != 0:
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
            self._store(1)
        if self._timer is not None and threading.current_thread() is not self._timer:
            self._timer.cancel()
