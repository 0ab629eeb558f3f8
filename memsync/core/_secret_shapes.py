"""The value shapes of `memsync.core.secrets`: the provider token patterns, their shared
prefilter, and the names of every kind `find_secrets` reports (`SECRET_KINDS`).

Private: a table, split out of `secrets.py` to keep each module under the size ceiling;
the design notes are in `memsync.core.secrets`' docstring.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from memsync.core.lazyre import LazyPattern

_BEARER = "bearer token"
_BASIC = "basic auth header"
_URL_CRED = "password in URL"
_PW_ASSIGN = "password assignment"
_KEY_ASSIGN = "secret assignment"
_CLI_PW = "password on a command line"
_WIFI = "Wi-Fi password"
_BACKTICK_PW = "password in backticks"
_PROSE_PW = "password in prose"
_PIN = "PIN or access code"
_GENERATED_IN_PROSE = "secret in prose"

_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_DIGIT = frozenset("0123456789")
# Separators and sentence punctuation are not a "symbol" class: "v1.2.3-beta" is not random.
_NOT_SYMBOL = _UPPER | _LOWER | _DIGIT | frozenset("-_./,;:'\"()[]{}<> \t")


def _classes(value: str) -> int:
    """Count the character classes (upper, lower, digit, symbol) present in `value`."""
    chars = set(value)
    return (
        bool(chars & _UPPER)
        + bool(chars & _LOWER)
        + bool(chars & _DIGIT)
        + bool(chars - _NOT_SYMBOL)
    )


def _plausible(value: str, classes: int) -> bool:
    """Given a token body, return True unless it is a filler such as "xxxx..." or "0000..."."""
    return len(set(value)) >= 5 and _classes(value) >= classes


class _Detector(msgspec.Struct, frozen=True):
    """One value shape. Its `pattern` runs only if the shared prefilter matched and one of
    its `triggers` occurs in the text (in `text.lower()` when `folded`). A match counts when
    its group "v" (if any) has at least `classes` character classes and 5 distinct
    characters, which drops documentation fillers like `ghp_xxxx...`, and `valid(v)` (if
    set) holds."""

    name: str
    pattern: LazyPattern
    anchor: str
    """A regex matching wherever `pattern` can. Each of its branches starts with a literal
    character rare in prose ("_", "-", "J", ...) and checks the rest with a look-behind;
    all anchors and `_PROSE_ANCHORS` form one `_PREFILTER`, which the regex engine scans
    for those first characters only: it rejects a typical sentence in about 1 µs, where
    the substring
    tests of all triggers take 3 µs. (A branch starting with a class such as "[-_]" or a
    group turns that scan off and costs 10x.)"""
    triggers: tuple[str, ...]
    folded: bool = False
    classes: int = 1
    valid: Callable[[str], bool] | None = None


def _is_snowflake_b64(value: str) -> bool:
    """Given the first part of a Discord token, return True when it is base64 of a
    17-20 digit snowflake id (the account id), as every Discord bot token's is."""
    import binascii  # a Discord-shaped candidate only: `add`'s start-up has no base64
    from base64 import urlsafe_b64decode

    try:
        raw = urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        return False
    return 17 <= len(raw) <= 20 and raw.isdigit()


_B = r"(?<![A-Za-z0-9_])"  # a left edge that, unlike \b, also refuses "_" ("my_ghp_...")
_E = r"(?![A-Za-z0-9_])"

_DETECTORS = (
    _Detector(
        "private key block",
        # Key material must follow the header: naming the header in prose is not a key.
        # Newlines may be real or, in a raw JSON line, the two characters "\\n".
        LazyPattern(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:\s|\\[nr])*"
            r"(?:Proc-Type:|Version:|Comment:|(?P<v>[A-Za-z0-9+/=]{20,}))"
        ),
        r"-----BEGIN",
        ("-----BEGIN",),
        classes=2,
    ),
    _Detector(
        "AWS access key id",
        LazyPattern(_B + r"(?:AKIA|ASIA)(?P<v>[A-Z0-9]{16})" + _E),
        r"A[KS]IA",
        ("AKIA", "ASIA"),
    ),
    _Detector(
        "AWS secret access key",
        LazyPattern(
            r"(?i)aws[_-]secret[_-](?:access[_-])?key\\?[\"']?\s*(?:=|:)\s*\\?[\"']?"
            r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        r"_(?<=[Aa][Ww][Ss]_)[Ss][Ee][Cc]|-(?<=[Aa][Ww][Ss]-)[Ss][Ee][Cc]",
        ("aws_secret", "aws-secret"),
        folded=True,
        classes=2,
    ),
    _Detector(
        "GitHub token",
        LazyPattern(
            _B + r"(?:gh[pousr]_(?P<v>[A-Za-z0-9]{36,251})|github_pat_[A-Za-z0-9_]{60,251})" + _E
        ),
        r"_(?<=\bgh[pousr]_)|_(?<=\bgithub_)pat_",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        classes=2,
    ),
    _Detector(
        "GitLab token",
        LazyPattern(_B + r"gl(?:pat|dt|rt|ptt|soat|oas)-(?P<v>[A-Za-z0-9_-]{20,})"),
        r"-(?<=\bglpat-)|-(?<=\bgldt-)|-(?<=\bglrt-)|-(?<=\bglptt-)|-(?<=\bglsoat-)|-(?<=\bgloas-)",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "gloas-"),
        classes=2,
    ),
    _Detector(
        "Slack token",
        # Slack tokens carry numeric team/user ids: xoxb-<digits>-<digits>-<random>.
        LazyPattern(_B + r"xox[abeprs]-(?:[0-9]+-)+(?P<v>[A-Za-z0-9]{8,})"),
        r"-(?<=\bxox[abeprs]-)",
        ("xox",),
    ),
    _Detector(
        "Slack webhook URL",
        LazyPattern(
            r"(?i)https://hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"(?P<v>[A-Za-z0-9_/-]{20,})"
        ),
        r"\.(?<=[Hh][Oo][Oo][Kk][Ss]\.)[Ss][Ll][Aa][Cc][Kk]\.",
        ("hooks.slack.com",),
        folded=True,
        classes=2,
    ),
    _Detector(
        "Stripe secret key",
        LazyPattern(_B + r"(?:[sr]k_(?:live|test)|whsec)_(?P<v>[A-Za-z0-9]{16,})" + _E),
        r"_(?:live|test)_(?<=\b[sr]k_live_|\b[sr]k_test_)|_(?<=\bwhsec_)",
        ("k_live_", "k_test_", "whsec_"),
        classes=2,
    ),
    _Detector(
        "Anthropic API key",
        LazyPattern(_B + r"sk-ant-(?:[a-z]+[0-9]{2}-)?(?P<v>[A-Za-z0-9_-]{32,})"),
        r"-(?<=\bsk-)ant-",
        ("sk-ant-",),
        classes=3,
    ),
    _Detector(
        "OpenAI API key",
        # Legacy keys are sk-<48 alphanumerics>, newer ones sk-proj-<long base64url>; both
        # mix upper, lower and digits, which "sk-learn-compatible-estimator-..." does not.
        LazyPattern(_B + r"sk-(?!ant-)(?:(?:proj|svcacct|admin)-)?(?P<v>[A-Za-z0-9_-]{32,})"),
        r"-(?<=\bsk-)",
        ("sk-",),
        classes=3,
    ),
    _Detector(
        "Google API key",
        LazyPattern(_B + r"AIza(?P<v>[A-Za-z0-9_-]{35})(?![A-Za-z0-9_-])"),
        r"AIza",
        ("AIza",),
        classes=2,
    ),
    _Detector(
        "npm token",
        LazyPattern(_B + r"npm_(?P<v>[A-Za-z0-9]{36})" + _E),
        r"_(?<=\bnpm_)",
        ("npm_",),
        classes=2,
    ),
    _Detector(
        "SendGrid API key",
        LazyPattern(_B + r"SG\.(?P<v>[A-Za-z0-9_-]{16,32})\.[A-Za-z0-9_-]{24,64}(?![A-Za-z0-9_-])"),
        r"SG\.",
        ("SG.",),
        classes=2,
    ),
    _Detector(
        "Twilio API key",
        LazyPattern(r"(?<![A-Za-z0-9_])SK(?P<v>[0-9a-f]{32})" + _E),
        r"SK[0-9a-f]",
        ("SK",),
        classes=2,
    ),
    _Detector(
        "Hugging Face token",
        LazyPattern(_B + r"hf_(?P<v>[A-Za-z0-9]{30,})" + _E),
        r"_(?<=\bhf_)",
        ("hf_",),
        classes=2,
    ),
    _Detector(
        "Azure access key",
        # Storage, Service Bus and Event Hubs connection strings: AccountKey=<88 base64>,
        # SharedAccessKey=<44 base64>. "AccountKey=<your key>" has no base64 to match.
        LazyPattern(
            r"(?:AccountKey|SharedAccessKey)=(?P<v>[A-Za-z0-9+/]{30,100}={0,2})(?![A-Za-z0-9+/=])"
        ),
        r"=(?<=ccountKey=)|=(?<=AccessKey=)",
        ("AccountKey=", "SharedAccessKey="),
        classes=3,
    ),
    _Detector(
        "Azure SAS signature",
        # A shared access signature (URL or SharedAccessSignature=...) always has "sv=" (the
        # service version) and signs with "sig=" (base64 HMAC, usually URL-encoded).
        LazyPattern(r"(?<=[?&;])sig=(?P<v>[A-Za-z0-9%+/]{30,}(?:=|%3[Dd]){0,2})"),
        r"=(?<=[?&;]sig=)",
        ("sv=",),
        classes=3,
    ),
    _Detector(
        "Telegram bot token",
        # <bot id>:<35 base64url characters>; the secret part starts with "AA".
        LazyPattern(r"(?<![0-9A-Za-z_:])[0-9]{5,12}:(?P<v>AA[A-Za-z0-9_-]{33})(?![A-Za-z0-9_-])"),
        r":(?<=[0-9]:)AA",
        (":AA",),
        classes=2,
    ),
    _Detector(
        "Discord bot token",
        # <base64 of the bot's numeric id>.<timestamp>.<HMAC>: the id's digits encode to
        # "MT", "Nz", "OD"... and the part must decode to 17-20 digits.
        LazyPattern(
            _B + r"(?P<v>(?:M[Tjz]|N[DTjz]|O[DT])[A-Za-z0-9_-]{21,25})\.[A-Za-z0-9_-]{6,7}"
            r"\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])"
        ),
        r"M[Tjz][A-Za-z0-9_-]{21,25}\.|N[DTjz][A-Za-z0-9_-]{21,25}\.|O[DT][A-Za-z0-9_-]{21,25}\.",
        (".",),
        classes=2,
        valid=_is_snowflake_b64,
    ),
    _Detector(
        "Shopify token",
        LazyPattern(_B + r"shp(?:at|ca|pa|ss)_(?P<v>[a-fA-F0-9]{32})" + _E),
        r"_(?<=\bshpat_)|_(?<=\bshpca_)|_(?<=\bshppa_)|_(?<=\bshpss_)",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        classes=2,
    ),
    _Detector(
        "DigitalOcean token",
        LazyPattern(_B + r"do[opr]_v1_(?P<v>[a-f0-9]{64})" + _E),
        r"_(?<=\bdoo_)v1_|_(?<=\bdop_)v1_|_(?<=\bdor_)v1_",
        ("_v1_",),
        classes=2,
    ),
    _Detector(
        "PyPI token",
        # A macaroon: "pypi-AgE" then base64 of the "pypi.org" location and caveats.
        LazyPattern(_B + r"pypi-AgE(?P<v>[A-Za-z0-9_-]{50,})"),
        r"-(?<=\bpypi-)AgE",
        ("pypi-AgE",),
        classes=3,
    ),
    _Detector(
        "Mailgun API key",
        LazyPattern(_B + r"key-(?P<v>[0-9a-z]{32})" + _E),
        r"-(?<=\bkey-)",
        ("key-",),
        classes=2,
    ),
    _Detector(
        "memsync hub key",
        # `memsync key show` prints a hub encryption key as msk1-<43 base64url characters>
        # (issue 24, item 5): anyone holding it reads every encrypted hub.
        LazyPattern(_B + r"msk1-(?P<v>[A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])"),
        r"-(?<=\bmsk1-)",
        ("msk1-",),
        classes=2,
    ),
    _Detector(
        "JSON Web Token",
        # The header and payload are base64url JSON objects, so both start with "eyJ" ('{"').
        LazyPattern(_B + r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.(?:[A-Za-z0-9_-]{10,})?"),
        r"J(?<=\beyJ)",
        ("eyJ",),
    ),
)


# Anchors of the prose and command-line checks further down: "mysql -pS3cret", "Wi-Fi",
# "WLAN", and a backtick right after "is", "was", ":" or "=" (the passphrase detector's
# operators). "wifi"/"WiFi" is one substring test instead: a branch starting at its rarest
# letter, "f", stops the scan too often and costs more.
_PROSE_ANCHORS = (
    r"-(?<=\s-)p\S",
    r"-(?<=[Ww][Ii]-)[Ff][Ii]",
    r"L(?<=[Ww]L)AN",
    r"`(?<=[sS:=][ \t]`)",
    r"`(?<=[:=]`)",
    r"`(?<=[ \t][ \t]`)",
)
_PREFILTER = LazyPattern("|".join((*(d.anchor for d in _DETECTORS), *_PROSE_ANCHORS)))

SECRET_KINDS = (
    *(d.name for d in _DETECTORS),
    _BEARER,
    _BASIC,
    _URL_CRED,
    _PW_ASSIGN,
    _KEY_ASSIGN,
    _CLI_PW,
    _WIFI,
    _BACKTICK_PW,
    _PROSE_PW,
    _PIN,
    _GENERATED_IN_PROSE,
)
"""Every name `find_secrets` can return, in the order it returns them."""
_ORDER = {name: i for i, name in enumerate(SECRET_KINDS)}
