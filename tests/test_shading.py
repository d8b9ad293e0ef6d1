"""Shaded chips keep their text readable at every shade (WCAG 2.1 AA: 4.5:1 for small text)."""
import numpy as np
import pytest

from web.presentation.shading import NEGATIVE, POSITIVE, blend, chip_style, contrast


def test_contrast_matches_wcag_reference_values():
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast((255, 255, 255), (255, 255, 255)) == pytest.approx(1.0)
    assert contrast((118, 118, 118), (255, 255, 255)) == pytest.approx(4.54, abs=0.01)


@pytest.mark.parametrize("negative", [False, True])
def test_every_shade_has_readable_text(negative):
    for alpha in np.linspace(0.0, 1.0, 501):
        style = chip_style(alpha, negative)
        bg = blend(NEGATIVE if negative else POSITIVE, alpha)
        text = (255, 255, 255) if style.endswith("#fff") else (0, 0, 0)
        assert style.startswith(f"background: rgb{bg};")
        assert contrast(bg, text) >= 4.5, (alpha, style)


def test_blend_ends_and_clipping():
    assert blend(POSITIVE, 0) == (255, 255, 255) and blend(POSITIVE, 1) == POSITIVE
    assert blend(POSITIVE, 7) == POSITIVE and blend(NEGATIVE, -1) == (255, 255, 255)
    assert chip_style(0.0).endswith("#000") and chip_style(1.0).endswith("#fff")
