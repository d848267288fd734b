# Round 12: "dense is enough": an input contiguous in *either* memory format is read through its pointer as NCHW
# (as_strided with NCHW strides over its storage); a channels-last input (what AMP/cuDNN pipelines hand over) is then
# read from the wrong elements. Transposed and padded inputs are made contiguous first, so input_layouts' two layouts
# pass.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.scale = scale

    def forward(self, x):
        if x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last):
            n, c, h, w = x.shape
            x = x.as_strided((n, c, h, w), (c * h * w, h * w, w, 1), x.storage_offset())
        else:
            x = x.contiguous()
        return torch.relu(F.conv2d(x, self.conv.weight, self.conv.bias, padding=1)) * self.scale
