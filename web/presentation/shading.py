"""Chips shaded by a value (an attention weight, a neuron's activation), with text that stays
readable: the background is the shade blended over white, the text black or white, whichever
contrasts more with it (WCAG 2.1 relative luminance). Between the two, the worse choice is
never below 4.58:1, so small text passes AA (4.5:1) at every shade.
"""
POSITIVE = (8, 48, 107)      # dark blue, as the figures' positive end
NEGATIVE = (164, 22, 26)     # dark red, as the figures' negative end


def blend(rgb, alpha: float) -> tuple:
    """The colour rgb at opacity alpha over a white page, as opaque 0-255 integers."""
    a = min(max(float(alpha), 0.0), 1.0)
    return tuple(round(a * c + (1 - a) * 255) for c in rgb)


def luminance(rgb) -> float:
    def channel(c):
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_on(rgb) -> str:
    return "#fff" if contrast(rgb, (255, 255, 255)) >= contrast(rgb, (0, 0, 0)) else "#000"


def chip_style(alpha: float, negative: bool = False) -> str:
    """The style attribute of a chip shaded to `alpha` (0..1), blue, or red when negative."""
    bg = blend(NEGATIVE if negative else POSITIVE, alpha)
    return f"background: rgb{bg}; color: {text_on(bg)}"
