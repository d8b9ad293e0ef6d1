"""How the page writes numbers and counts: Jinja filters (registered in app.py), the one way a
template formats a number.

    {{ x|fixed(2) }}            "0.00", never "-0.00" (a value that rounds to zero is zero)
    {{ x|signed(1) }}           "+2.5", "-0.3", "+0.0" (a value that rounds to zero is "+0.0")
    {{ x|sig }}, x|sig(3)       "%g": 6 (or 3) significant digits, "1e+06" when large
    {{ x|sci(1) }}              "1.2e-05"
    {{ n|grouped }}             "1,024" ("{:,}"), n|grouped(0): "1,024" from 1023.6
    {{ p|percent(1) }}          a fraction as a percentage: "12.5%" (100 p, fixed)
    {{ p|percent(2, 0.0001) }}  with a floor: "0%" for 0, "<0.01%" below it
    {{ p|probability }}         a probability as the overview writes it: more digits when small
    {{ s|ms(2) }}               seconds as milliseconds: "3.14 ms"
    {{ b|size("MB", 1) }}       bytes in MB or GB (decimal units): "12.3 MB"
    {{ [T, d]|shape }}          an array's shape: "[21, 576]"
    {{ n|count("token") }}      "1 token", "2 tokens", "1,024 tokens"
    {{ n|agree("holds", "hold") }}  the verb that agrees with n ("1 token holds", "2 tokens hold")
    {{ n|ordinal }}             "1st", "2nd", "30th": a block numbered from 0 counted for people

Python code that writes a number into a sentence calls the same functions.
"""
import math

UNITS = {"kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def fixed(value, places: int = 2) -> str:
    """value with `places` decimals; a negative value that rounds to zero is written "0.00"."""
    text = f"{float(value):.{places}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text


def signed(value, places: int = 1) -> str:
    """value with its sign always written ("+2.5", "-0.3"); one that rounds to zero: "+0.0"."""
    text = f"{float(value):+.{places}f}"
    if float(text) == 0:
        text = "+" + text[1:]
    return text


def sig(value, digits: int = None) -> str:
    """value with `digits` significant digits (default 6), as "%g" writes it; -0 is "0"."""
    text = f"{float(value):g}" if digits is None else f"{float(value):.{digits}g}"
    return "0" if text == "-0" else text


def sci(value, places: int = 1) -> str:
    """value in scientific notation with `places` decimals: "1.2e-05"."""
    return f"{float(value):.{places}e}"


def grouped(value, places: int = None) -> str:
    """value with its thousands grouped by commas ("{:,}"); `places`: that many decimals."""
    if places is None:
        return f"{value:,}"
    text = f"{float(value):,.{places}f}"
    if text.startswith("-") and float(text.replace(",", "")) == 0:
        text = text[1:]
    return text


def percent(p, places: int = 1, floor: float = None) -> str:
    """The fraction p as a percentage with `places` decimals ("12.5%"). With `floor`: 0 is
    "0%", and a p below floor is "<" and the floor ("<0.01%" for 0.0001 at two places)."""
    if floor is not None:
        if p == 0:
            return "0%"
        if p < floor:
            return f"<{fixed(100 * floor, places)}%"
    return f"{fixed(100 * p, places)}%"


def probability(p: float) -> str:
    """A probability as the overview and the models' comparison write it: one decimal, more
    digits for a small one (a token drawn from the tail at a high temperature is not "0.0%"),
    "0%" only when it is 0."""
    if p == 0:
        return "0%"
    if p >= 0.001:
        return f"{100 * p:.1f}%"
    if p >= 1e-8:                                   # two significant digits
        return f"{100 * p:.{1 - math.floor(math.log10(100 * p))}f}%"
    return "<0.000001%"


def ms(seconds, places: int = 1) -> str:
    """A time in seconds written in milliseconds: "3.1 ms"."""
    return f"{fixed(1000 * seconds, places)} ms"


def size(n_bytes, unit: str = "MB", places: int = 1) -> str:
    """A number of bytes in decimal kB, MB, GB or TB: "12.3 MB"."""
    return f"{fixed(n_bytes / UNITS[unit], places)} {unit}"


def shape(dims) -> str:
    """An array's shape as the page writes it: "[21, 576]"."""
    return "[" + ", ".join(str(int(d)) for d in dims) + "]"


def count(n, one: str, many: str = None) -> str:
    """n and the noun that agrees with it: "1 token", "3 tokens", "12,000 tokens"."""
    many = many or one + "s"
    return f"{n:,} {one if n == 1 else many}"


def agree(n, one: str, many: str) -> str:
    """The word of the two that agrees with n ("holds" for 1, "hold" otherwise)."""
    return one if n == 1 else many


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 30th."""
    if n % 100 in (11, 12, 13):
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


FILTERS = dict(fixed=fixed, signed=signed, sig=sig, sci=sci, grouped=grouped, percent=percent,
               probability=probability, ms=ms, size=size, shape=shape, count=count,
               agree=agree, ordinal=ordinal)
