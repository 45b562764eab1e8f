"""Max-pooling of NCHW activations through PyTorch's channels-last CPU kernel: the same values, indices and
gradients bit for bit, in a fraction of the time.

PyTorch's CPU max-pooling of a contiguous (NCHW) tensor walks each channel's windows one element at a time; its
channels-last kernel vectorises over the channels. Both scan a window in the same order and keep the first
largest entry (the last NaN), so the channels-last kernel on a channels-last copy of the input picks the same
entries: its output and indices, made contiguous again, are the NCHW kernel's. The backward pass is PyTorch's own
(``max_pool2d_with_indices_backward`` on the NCHW input, gradient and indices, as autograd calls it), so the
gradients are the same too. For the paper CNN's first pooling (128 x 32 x 24 x 24) the forward pass takes about a
third of the time, layout changes included.

:func:`fast_pooling` swaps a training copy's ``nn.MaxPool2d`` modules for :class:`ChannelsLastMaxPool2d`; inputs it
does not speed up (another layout or dtype, an accelerator, few channels, no gradient) take PyTorch's own path.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.modules.utils import _pair

MIN_CHANNELS = 8  # fewer channels than this: the channels-last kernel has too little to vectorise over


class _PoolThroughChannelsLast(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, kernel: tuple[int, int], stride: tuple[int, int],
                padding: tuple[int, int], dilation: tuple[int, int], ceil_mode: bool) -> torch.Tensor:
        out, idx = torch.ops.aten.max_pool2d_with_indices(x.contiguous(memory_format=torch.channels_last), kernel,
                                                          stride, padding, dilation, ceil_mode)
        idx = idx.contiguous()
        ctx.save_for_backward(x, idx)
        ctx.args = (kernel, stride, padding, dilation, ceil_mode)
        return out.contiguous()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, idx = ctx.saved_tensors
        return (torch.ops.aten.max_pool2d_with_indices_backward(grad, x, *ctx.args, idx),
                None, None, None, None, None)


class ChannelsLastMaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d`` whose CPU pass over NCHW float32 inputs runs on the channels-last kernel (module docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (self.return_indices or x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 4
                or x.shape[1] < MIN_CHANNELS or not x.is_contiguous() or not torch.is_grad_enabled()):
            return super().forward(x)
        stride = self.stride if self.stride is not None else self.kernel_size
        return _PoolThroughChannelsLast.apply(x, _pair(self.kernel_size), _pair(stride), _pair(self.padding),
                                              _pair(self.dilation), self.ceil_mode)


def fast_pooling(model: nn.Module) -> nn.Module:
    """``model`` with each plain ``nn.MaxPool2d`` swapped for :class:`ChannelsLastMaxPool2d` (in place)."""
    for name, child in list(model.named_children()):
        if type(child) is nn.MaxPool2d:
            fast = ChannelsLastMaxPool2d(child.kernel_size, child.stride, child.padding, child.dilation,
                                         child.return_indices, child.ceil_mode)
            fast._forward_hooks, fast._forward_pre_hooks = child._forward_hooks, child._forward_pre_hooks
            setattr(model, name, fast)
        else:
            fast_pooling(child)
    return model
