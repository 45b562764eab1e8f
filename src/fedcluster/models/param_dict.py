"""The parameters of a model as a ``{name: tensor}`` dict (a *stack* carries a leading unit dimension);
what they are made of and operated on lives in :mod:`fedcluster.engine.params`."""

from __future__ import annotations

import torch

Params = dict[str, torch.Tensor]
