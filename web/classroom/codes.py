"""Join codes, teacher secrets and student ids: random, from the `secrets` module.

A join code is CODE_LENGTH characters from an alphabet without look-alikes (no 0/O, 1/I/L):
31 symbols, so 31**7 = 27.5 billion codes, 34.7 bits. Typed codes are read case-insensitively,
with spaces and dashes ignored. Join attempts with a wrong code are rate-limited per client
(web/core/limits.py CLASSROOM["join_failures"]), so guessing a live code is hopeless.
"""
import hashlib
import hmac
import math
import re
import secrets

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 7
CODE_BITS = CODE_LENGTH * math.log2(len(ALPHABET))
_CODE = re.compile("[%s]{%d}" % (ALPHABET, CODE_LENGTH))


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize(typed: str):
    """The code a person typed ("abc-d 2ef" -> "ABCD2EF"), or None if it cannot be one."""
    if not isinstance(typed, str) or len(typed) > 40:
        return None
    code = re.sub(r"[\s-]+", "", typed).upper()
    return code if _CODE.fullmatch(code) else None


LOOK_ALIKES = "0O1IL"


def not_a_code(typed: str) -> str:
    """Why `typed` cannot be a code (normalize gave None), in words a student understands. Such
    a typo is not a guess at a real code, so it does not count against the client's tries."""
    cleaned = re.sub(r"[\s-]+", "", typed if isinstance(typed, str) else "").upper()
    unused = sorted({c for c in cleaned if c in LOOK_ALIKES}, key=LOOK_ALIKES.index)
    others = sorted({c for c in cleaned if c not in ALPHABET and c not in LOOK_ALIKES})
    if others:
        return (f"Class codes are {CODE_LENGTH} letters and digits; “{' '.join(others[:5])}” "
                "is not one of them.")
    if unused:
        return (f"Class codes never use {', '.join(unused)}: they look too much like other "
                f"letters and digits, so codes leave out 0, O, 1, I and L. Read the code on the "
                f"teacher's screen again.")
    return (f"Class codes are {CODE_LENGTH} letters and digits; this has {len(cleaned)}.")


def client_tag(address: str) -> str:
    """What the store keeps of a client's address to count its members and sessions: a hash,
    enough to tell two addresses apart, not to show one."""
    return hashlib.sha256(b"llmx-class-client:" + address.encode()).hexdigest()[:16]


def shown(code: str) -> str:
    """The code as the projector shows it: in two groups, easier to read across a room."""
    return f"{code[:4]} {code[4:]}"


def new_secret() -> str:
    """The teacher's secret (256 bits), held only in the teacher's HttpOnly cookie."""
    return secrets.token_urlsafe(32)


def secret_hash(secret: str) -> str:
    """What the store keeps of the teacher's secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return bool(secret) and hmac.compare_digest(secret_hash(secret), stored_hash or "")


def new_student_id() -> str:
    """An anonymous student's id (128 random bits): no name, no account, nothing personal."""
    return secrets.token_urlsafe(16)


STUDENT_ID = re.compile(r"[A-Za-z0-9_-]{22}")
