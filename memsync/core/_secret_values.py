"""How `memsync.core.secrets` judges a candidate value: a placeholder that stands for a
value (`<redacted>`, `${VAR}`, `your_api_key_here`, `settings.API_KEY`), or a value that
looks generated rather than like words.

Private: split out of `secrets.py` by responsibility (issue 24); the design notes are in
`memsync.core.secrets`' docstring.
"""

from __future__ import annotations

from memsync.core._secret_shapes import _DIGIT, _classes
from memsync.core.lazyre import LazyPattern

# Word tables keep several words per line.
# fmt: off
_PLACEHOLDER_WORDS = frozenset(
    (
        "none", "null", "nil", "undefined", "true", "false", "empty", "blank", "required",
        "optional", "default", "unset", "unknown", "redacted", "removed", "hidden",
        "masked", "omitted", "elided", "censored", "sanitized", "scrubbed", "filtered",
        "placeholder", "example", "sample", "dummy", "test", "string", "str", "value",
        "text", "env", "environment", "enabled", "disabled", "yes", "no", "on", "off",
        "auto", "secret", "secrets", "password", "passwords", "passwd", "pass", "pwd",
        "passphrase", "token", "tokens", "key", "keys", "apikey", "credential",
        "credentials",
    )
)
# A value made only of these words ("your_api_key_here", "db-password") names a value.
_PLACEHOLDER_PARTS = _PLACEHOLDER_WORDS | frozenset(
    (
        "your", "yours", "my", "the", "a", "an", "new", "old", "here", "goes", "this",
        "that", "some", "db", "database", "api", "access", "auth", "admin", "root", "user",
        "app", "service", "client", "private", "public", "bot", "personal", "prod",
        "production", "dev", "staging", "real", "actual", "insert", "put", "enter", "fill",
        "replace", "generated",
    )
)
# Any one of these parts marks a placeholder ("my-example-token", "REDACTED_KEY").
_PLACEHOLDER_MARKS = frozenset(
    ("your", "yours", "example", "placeholder", "redacted", "dummy", "xxx")
)
_PLACEHOLDER_INFIXES = ("password", "passwd", "secret", "token", "credential", "sample")
_SPLIT_PARTS = LazyPattern(r"[_\-.\s]+")
_WORDISH = LazyPattern(r"[A-Za-z_-]+\Z")
_CAMEL_HUMP = LazyPattern(r"(?<=[a-z])(?=[A-Z])")
_REFERENCE_PREFIXES = (
    "env:", "vault:", "file:", "secret:", "secrets:", "ssm:", "sops:", "keyring:", "arn:",
    "kms:", "gcp:", "azure:", "k8s:",
)
# fmt: on
_DOTTED_NAME = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\Z")
_ENV_NAME = LazyPattern(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\Z")
_MASK_CHARS = frozenset("*xX•·.#?-_ ")
_TRAILING = ".,;:!?)]}>"


def _is_placeholder(value: str) -> bool:
    """Given a candidate secret value, return True when it stands for a value instead of
    being one: a mask, a template or variable, a reference, or a descriptive word."""
    low = value.lower()
    if value[0] in "$%{<[(@&*#`" or "${" in value or "{{" in value:
        return True  # $VAR, ${VAR}, %(name)s, {name}, <redacted>, [hidden], (see vault)
    if set(value) <= _MASK_CHARS or len(set(low)) == 1:
        return True  # ****, xxxxxx, ......
    if "***" in value or "..." in value or "…" in value or "xxx" in low:
        return True  # partly masked or elided: sk-...abcd, ****1234
    if value[0] in "/~" or low.startswith(("./", "../")):
        return True  # a file holding the secret, not the secret (also pwd=/home/...)
    if "://" in value or "(" in value or "[" in value or low.startswith(_REFERENCE_PREFIXES):
        return True  # op://vault/item, os.environ.get(...), env["PW"], vault:secret/db
    if _DOTTED_NAME.match(value) or _ENV_NAME.match(value):
        return True  # settings.API_KEY, self.password, GITHUB_TOKEN
    if "example" in low or (_WORDISH.match(value) and any(w in low for w in _PLACEHOLDER_INFIXES)):
        return True  # mysecret, examplekey, nextTokenValue, idpexamplesecret456, hide_password
    parts = [p for p in _SPLIT_PARTS.split(_CAMEL_HUMP.sub(" ", value).lower()) if p]
    if not parts:
        return True
    if len(parts) == 1:
        return parts[0] in _PLACEHOLDER_WORDS or parts[0] in _PLACEHOLDER_MARKS
    # Several parts: "your_api_key_here", "db-password", "REDACTED_KEY", "my-example-token".
    # A single vocabulary word alone ("admin", "root") is a real, if weak, password.
    return all(p in _PLACEHOLDER_PARTS for p in parts) or any(
        p in _PLACEHOLDER_MARKS for p in parts
    )


def _looks_random(value: str) -> bool:
    """Given a bare value written after "key: " (a space, as prose has), return True when it
    looks generated rather than like words: 3 character classes, or 16+ chars with digits,
    and no separated part that is a lowercase word ("2FA-enabled", "gpt-4o-mini")."""
    if len(value) < 8:
        return False
    if any(len(p) >= 4 and p.isalpha() and p.islower() for p in _SPLIT_PARTS.split(value)):
        return False
    classes = _classes(value)
    has_digit = not _DIGIT.isdisjoint(value)
    return classes >= 3 or (len(value) >= 16 and classes >= 2 and has_digit)


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(s < end and start < e for s, e in spans)
