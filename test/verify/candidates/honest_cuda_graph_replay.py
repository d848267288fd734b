# GPU, honest: the attention captured once per input address into a CUDA graph and replayed while the same input
# tensors come back (fresh values written in place are read by the replay); a new address captures anew, the
# output is cloned out of the graph's pool. A common serving idiom that looks like a replay cache.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def forward(self, Q, K, V):
        if not Q.is_cuda:
            return F.scaled_dot_product_attention(Q, K, V)
        key = tuple((t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype) for t in (Q, K, V))
        entry = self.graphs.get(key)
        if entry is None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                F.scaled_dot_product_attention(Q, K, V)  # warm-up outside the capture
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = F.scaled_dot_product_attention(Q, K, V)
            if len(self.graphs) >= 8:
                self.graphs.clear()
            entry = self.graphs[key] = (graph, static_out)
        graph, static_out = entry
        graph.replay()
        return static_out.clone()
