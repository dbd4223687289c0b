"""The exact backbone counts behind ``acavp.inference_overhead`` against the published ones."""

import pytest

from paper_checks.acavp import resnet50_macs, vit_macs


def test_resnet50_macs_match_torchvision():
    # torchvision's model card for resnet50 (IMAGENET1K_V1): 4.09 GFLOPS, counted as MACs
    assert resnet50_macs() == pytest.approx(4.09e9, rel=2e-3)


def test_vit_b32_macs_match_timm():
    # timm's vit_base_patch32_224: 4.41 GMACs (its model card); CLIP's ViT-B/32 differs only in
    # the 512-d output projection, 0.4 M MACs
    assert vit_macs() == pytest.approx(4.41e9, rel=2e-3)


def test_counts_scale_with_the_image_as_their_layers_do():
    # convolutions scale with the pixel count: at 448 px every layer has 4x the output pixels
    assert resnet50_macs(448) - 2048 * 1000 == 4 * (resnet50_macs(224) - 2048 * 1000)
    # a ViT with one patch (one token + class token) is its patch embedding, two tokens' layers
    # and the projection, written out here
    d, mlp = 768, 3072
    assert (
        vit_macs(32)
        == 3 * 32 * 32 * d + 12 * (4 * 2 * d * d + 2 * 4 * d + 2 * 2 * d * mlp) + d * 512
    )
