"""The parameter blocks scenarios share, and their validation.

A scenario's parameters are a dataclass built from these blocks (``class MixtureParams(LocalData, LabelSplit)``)
plus its own fields; a block's default is changed by declaring the field again (the comment is kept). Each class
checks only its own fields in ``check``: :class:`ScenarioParams` runs every ``check`` of the class and its bases,
bases first, so no class calls its parent's.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedcluster.data.scenarios.common import SplitKind, check_image_size, check_split, check_val_fraction


@dataclass
class ScenarioParams:
    def __post_init__(self) -> None:
        for klass in reversed(type(self).__mro__):
            own = vars(klass).get("check")
            if own is not None:
                own(self)


@dataclass
class LabelSplit(ScenarioParams):
    """The label shift between the clients of one part (:func:`~fedcluster.data.scenarios.common.partition`)."""

    alpha: float = 1.0  # Dirichlet concentration α of the label split (smaller = more skew)
    split: SplitKind = "dirichlet"  # label split: dirichlet, dirichlet-global (FedRC code), classes or iid
    classes_per_client: int = 2  # classes each client holds with split=classes

    def check(self) -> None:
        check_split(self.alpha, self.classes_per_client)


@dataclass
class PartLabelSplit(LabelSplit):
    """The label split inside each part of a scenario that first splits the data into parts (rotations, sources):
    none by default."""

    split: SplitKind = "iid"


@dataclass
class Validation(ScenarioParams):
    val_fraction: float = 0.2  # share of each client's samples held out for local validation

    def check(self) -> None:
        check_val_fraction(self.val_fraction)


@dataclass
class LocalData(Validation):
    image_size: int | None = None  # downsample to image_size × image_size (null = keep)

    def check(self) -> None:
        check_image_size(self.image_size)
