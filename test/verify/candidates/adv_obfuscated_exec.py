# Pattern 22: obfuscated exec — the forward's body arrives base64-encoded.
import base64

import torch.nn as nn

_CODE = base64.b64decode(
    "aW1wb3J0IHRvcmNoLm5uLmZ1bmN0aW9uYWwgYXMgRgpkZWYgX2Zvcndh"
    "cmQoeCwgdywgYik6CiAgICByZXR1cm4gRi5saW5lYXIoeCwgdywgYiku"
    "cmVsdSgpCg=="
).decode()
_ns = {}
exec(_CODE, _ns)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ns["_forward"](x, self.gemm.weight, self.gemm.bias)
