"""One launch of one kernel path at one shape, for ncu (device script):
    ncu --set full -k regex:attn_hopper -c 1 python3 bench/attention/ncu_one.py PATH_NAME B H S D [DTYPE]
DTYPE: float16 (default), bfloat16 or float32 (PATH_F32_SPLIT).
"""

import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from device_run import load_generated, make_inputs  # noqa: E402

mod = load_generated()
path = getattr(mod, sys.argv[1])
b, h, s, d = (int(x) for x in sys.argv[2:6])
gen = torch.Generator(device="cuda").manual_seed(1)
dtype = getattr(torch, sys.argv[6]) if len(sys.argv) > 6 else torch.float16
q, k, v = make_inputs(b, h, s, s, d, d, dtype, False, gen)
mod.kforge_attention(q, k, v, path=path)
torch.cuda.synchronize()
