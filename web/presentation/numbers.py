"""How the page writes numbers and counts: Jinja filters (registered in app.py).

    {{ x|fixed(2) }}            "0.00", never "-0.00" (a value that rounds to zero is zero)
    {{ n|count("token") }}      "1 token", "2 tokens", "1,024 tokens"
    {{ n|agree("holds", "hold") }}  the verb that agrees with n ("1 token holds", "2 tokens hold")
    {{ n|ordinal }}             "1st", "2nd", "30th": a block numbered from 0 counted for people
"""


def fixed(value, places: int = 2) -> str:
    """value with `places` decimals; a negative value that rounds to zero is written "0.00"."""
    text = f"{float(value):.{places}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text


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


FILTERS = dict(fixed=fixed, count=count, agree=agree, ordinal=ordinal)
