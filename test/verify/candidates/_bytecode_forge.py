# Shared by the corpus's bytecode-cache forgeries (adv_problem_pyc_forge, adv_helper_pyc_forge): writes, for a source
# file, the cache a SourceFileLoader runs instead of it — a header with the source's modification time and size
# around a module-like code object. No compile(), no importlib: the code is a class body nested in a function of the
# caller's (a module-like code object among that function's constants), marshalled (marshal and the code reached by
# dir() suffixes) behind a header whose magic comes from any cache on disk.
import glob
import os
import struct
import sys


def _attr(obj, suffix):
    return getattr(obj, next(n for n in dir(obj) if n.endswith(suffix)))


def plant(path, holder):
    """Writes __pycache__/<name>.<cache tag>.pyc beside `path`, holding the `_Body` class body defined in `holder`."""
    path = os.path.abspath(path)
    dumps = _attr(next(m for n, m in list(sys.modules.items()) if n.endswith("arshal")), "umps")
    body = next(c for c in _attr(_attr(holder, "ode__"), "_consts") if getattr(c, "co_name", "") == "_Body")
    magic = None
    for cached in glob.glob(os.path.join(os.path.dirname(os.__file__), "__pycache__", "*.pyc"))[:1]:
        with open(cached, "rb") as f:
            magic = f.read(4)
    st = os.stat(path)
    folder = os.path.join(os.path.dirname(path), "__pycache__")
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(path)[:-3] + "." + sys.implementation.cache_tag + ".pyc"
    header = magic + struct.pack("<III", 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(header + dumps(body))


def forged_here():
    """Whether a forged module (one that says KFORGE_FORGED) is loaded in this process."""
    return any(getattr(module, "KFORGE_FORGED", False) is True for module in list(sys.modules.values()))
