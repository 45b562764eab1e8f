"""Models, each split into a feature extractor (``body``, φ) and a head (``head``, θ)."""

from fedcluster.models import mobilenet, resnet, zoo  # noqa: F401  (register the models)
from fedcluster.models.base import SplitModel, build_model

__all__ = ["SplitModel", "build_model"]
