"""The MixPrompt study at CPU scale (Hao et al., NeurIPS 2025, OpenReview jt9iMeQQvM): synthetic
RGB-D scenes (:mod:`.scenes`), a depth sensor model (:mod:`.sensor`), mIoU (:mod:`.metrics`),
and backbone pretraining plus same-budget adaptation of every method (:mod:`.train`); the models
are in :mod:`nn.mixprompt`."""

from .metrics import confusion_matrix, miou
from .scenes import CLASSES, SOURCE_CLASSES, Scenes, rgbd_scenes
from .sensor import DEPTH_MEAN, DEPTH_STD, depth_channels, depth_sensor
from .train import (
    GROUPS,
    METHODS,
    AdaptResult,
    Split,
    adapt,
    adapt_group,
    build,
    pretrain_backbone,
    target_data,
)

__all__ = [
    "CLASSES",
    "SOURCE_CLASSES",
    "Scenes",
    "rgbd_scenes",
    "DEPTH_MEAN",
    "DEPTH_STD",
    "depth_sensor",
    "depth_channels",
    "confusion_matrix",
    "miou",
    "METHODS",
    "Split",
    "target_data",
    "build",
    "pretrain_backbone",
    "AdaptResult",
    "adapt",
    "adapt_group",
    "GROUPS",
]
