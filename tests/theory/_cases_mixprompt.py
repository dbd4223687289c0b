"""Valid calls of :mod:`theory.mixprompt` for the bad-input harness (``tests/_bad_input.py``)."""

from _bad_input import Case

from theory import mixprompt as MP

CASES = {
    "theory.mixprompt.ada_params": Case(MP.ada_params, dict(channels=16)),
    "theory.mixprompt.patch_embed_params": Case(
        MP.patch_embed_params, dict(in_channels=3, out_channels=16)
    ),
    "theory.mixprompt.block_params": Case(MP.block_params, dict(channels=16)),
    "theory.mixprompt.seg_head_params": Case(
        MP.seg_head_params, dict(channels=(16, 32, 64), embed=16, num_classes=4)
    ),
    "theory.mixprompt.mixprompt_params": Case(
        MP.mixprompt_params, dict(channels=(16, 32, 64), num_classes=4)
    ),
    "theory.mixprompt.resnet50_stem_layer1_params": Case(MP.resnet50_stem_layer1_params, {}),
    "theory.mixprompt.paper_trainable_params": Case(MP.paper_trainable_params, {}),
}
