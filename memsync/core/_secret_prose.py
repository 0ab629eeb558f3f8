"""Passwords given on command lines and in prose, for `memsync.core.secrets`:
`mysql -pS3cret`, "the wifi password is Tr0ub4dor&3", "the passphrase is `correct horse
battery staple`", and passphrases written after "is"/":"/"=" with punctuation-heavy values
("the passphrase is: x7!Qz#9$Lm&", "password for the NAS = 'p@55;w0rd!!'", "my PIN is 4821").

Each check adds its kind's name to `found` and the span it matched to `spans`; a span
already reported (an assignment, a provider token) is not reported again. Private: split
out of `secrets.py` by responsibility (issue 24); the design notes are in
`memsync.core.secrets`' docstring.
"""

from __future__ import annotations

import re

from memsync.core._secret_shapes import _BACKTICK_PW, _CLI_PW, _PIN, _PROSE_PW, _WIFI, _classes
from memsync.core._secret_values import _SPLIT_PARTS, _TRAILING, _is_placeholder, _overlaps

# `mysql -u root -pS3cret`: the password is glued to "-p" ("-p" alone prompts for it, "-P" is
# the port). Only options may stand between the command and "-p" (each short one with at most
# one argument), so "mysql ... and pytest -pno:cacheprovider" is not read as one command.
_ARG = r"[^\s;|&`<>]"
_MYSQL_PW_RE = re.compile(
    r"(?<![\w.-])(?:mysql(?:dump|admin|import|check|show|pump|binlog|slap)?"
    r"|mariadb(?:-?dump|-?admin)?)"
    r"(?:[ \t]+(?:-[A-Za-oq-z]" + _ARG + r"*(?:[ \t]+[^\s;|&`<>-]" + _ARG + r"*)?"
    r"|--[A-Za-z][\w-]*(?:=" + _ARG + r"*)?))*?"
    r"[ \t]+-p(?:\"(?P<dq>[^\"\s]+)\"|'(?P<sq>[^'\s]+)'|(?P<bare>" + _ARG + r"+))"
)
# "the wifi password is Tr0ub4dor&3", "Wi-Fi password: hunter2hunter2", "wifi pw is ...",
# "the password for the guest wifi is ...". Runs on `text.lower()`.
_IS_OPERATOR = r"(?:[ \t]+(?:is|was)(?:[ \t]*:)?|[ \t]*[:=])[ \t]*"
_WIFI_RE = re.compile(
    r"(?:(?:wi-?fi|wlan)(?:[ \t]+(?:network|guest|router))?[ \t]+"
    r"(?:password|passwd|passphrase|pass|pwd|pw|key)"
    r"|(?:password|passphrase|pw)[ \t]+(?:for|of)[ \t]+(?:(?:the|our|my)[ \t]+)?(?:guest[ \t]+)?"
    r"(?:wi-?fi|wlan)(?:[ \t]+network)?)" + _IS_OPERATOR
)
_PROSE_VALUE_RE = re.compile(
    r"\"(?P<dq>[^\"\s]+)\"|'(?P<sq>[^'\s]+)'|`(?P<bq>[^`\n]+)`|(?P<bare>[^\s\"'`]+)"
)
# "the passphrase is `correct horse battery staple`", "password for the NAS: `hunter22`".
# Runs on `text.lower()`; the value is read from `text` after the opening backtick.
_BACKTICK_PW_RE = re.compile(
    r"(?:password|passwd|passphrase|pass[ \t]+phrase|pwd|pw)"
    r"(?:[ \t]+for[ \t]+[^\s`]+(?:[ \t]+[^\s`]+){0,3}?)?" + _IS_OPERATOR + "`"
)
_BACKTICK_VALUE_RE = re.compile(r"[^`\n]+(?=`)")
# A command in backticks fetches the password rather than being it ("`pass show db`").
# fmt: off
_SECRET_COMMANDS = frozenset((
    "pass", "gopass", "op", "bw", "lpass", "security", "secret-tool", "keyring", "vault",
    "aws", "gcloud", "az", "kubectl", "cat", "echo", "sops", "age", "gpg", "openssl",
))
# fmt: on


_COUNT_WORD = re.compile(r"[0-9]+[^A-Za-z0-9]*[a-z]+\Z")
_WIFI_TERMS = frozenset(("wpa", "wpa2", "wpa3", "wep", "psk", "sae", "wps", "tkip", "aes", "ccmp"))


def _prose_password(value: str, quoted: bool) -> bool:
    """Given the value written after "the wifi password is", return True when it reads as a
    password: quoted (6+ characters), or a bare 8+ character token that is not a word
    ("on the fridge", "printed", "WPA2-protected") but has digits or symbols."""
    if len(value) < (6 if quoted else 8) or _is_placeholder(value):
        return False
    if quoted:
        return True
    if value.isalpha() or len(set(value)) < 5 or _COUNT_WORD.match(value):
        return False  # a word, or "10+chars", "12-characters"
    parts = _SPLIT_PARTS.split(value.lower())
    if any(p in _WIFI_TERMS for p in parts):
        return False  # "WPA2-PSK", "WPA3-only": the kind of key, not the key
    return not any(len(p) >= 4 and p.isalpha() for p in _SPLIT_PARTS.split(value) if p.islower())


def _mysql_password(text: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "password on a command line" for `mysql ... -p<value>` (and mysqldump, mariadb...)."""
    for m in _MYSQL_PW_RE.finditer(text):
        value = m["dq"] or m["sq"] or m["bare"].rstrip(_TRAILING)
        # No prose reading of "-p<value>" exists, so 4 characters suffice ("-proot").
        if len(value) >= 4 and not _is_placeholder(value) and not _overlaps(*m.span(), spans):
            found.add(_CLI_PW)
            spans.append(m.span())


def _wifi_password(text: str, low: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "Wi-Fi password" for "the wifi password is <value>" when the value reads as one."""
    for m in _WIFI_RE.finditer(low):
        v = _PROSE_VALUE_RE.match(text, m.end())
        if v is None or _overlaps(m.start(), v.end(), spans):
            continue
        quoted = v["dq"] or v["sq"] or v["bq"]
        value = quoted.strip() if quoted else v["bare"].rstrip(_TRAILING)
        if value and _prose_password(value, bool(quoted)):
            found.add(_WIFI)
            spans.append((m.start(), v.end()))


def _backtick_password(text: str, low: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "password in backticks" for "the passphrase is `correct horse battery staple`"."""
    for m in _BACKTICK_PW_RE.finditer(low):
        v = _BACKTICK_VALUE_RE.match(text, m.end())
        if v is None or _overlaps(m.start(), v.end(), spans):
            continue
        value = v[0].strip()
        if len(value) < 6 or value[0] == "-" or _is_placeholder(value):
            continue  # short, an option ("--password-stdin"), a placeholder
        words = value.split()
        if words[0] in _SECRET_COMMANDS:
            continue  # "`pass show db/prod`" fetches the password
        if len(words) > 1 and ("/" in value or "=" in value or " -" in value):
            continue  # a command line, not a passphrase
        found.add(_BACKTICK_PW)
        spans.append((m.start(), v.end()))


# "the passphrase is: x7!Qz#9$Lm&", "password for the NAS = 'p@55;w0rd!!'", "root password:
# hunter2!", "use the password 'S3cr3t!x' for staging", "my PIN is 4821", "the alarm code is
# 0815". Runs on `text.lower()`. A name, an optional "for/to/of/on <up to 4 words>", then
# "is"/"was"/":"/"=" (or nothing before a quoted value); the value is judged by
# `_prose_secret`, which refuses words, counts, versions and dates: the sentence around a
# credential word is almost always about the credential, not one.
_PW_WORD = r"pass(?:word|wd|phrase)?|pass[ \t]+phrase|pwd|pw"
# Every branch starts with "p" or "c": the regex engine then scans for those two letters
# only. "code" and "combination" count after one of `_CODE_OWNERS` ("the door code is").
_CODE_WORD = r"passcode|pin(?:[ \t]+(?:code|number))?|code|combination"
_CODE_OWNERS = frozenset(
    ("door", "alarm", "gate", "garage", "keypad", "lock", "safe", "entry", "access", "security")
)
_PROSE_PW_RE = re.compile(
    r"(?<![a-z0-9_@.-])(?:(?P<pw>" + _PW_WORD + r")|(?P<code>" + _CODE_WORD + r"))s?"
    r"(?:[ \t]+(?:for|to|of|on)[ \t]+(?:[^\s:=`'\"“]+[ \t]+){0,3}?[^\s:=`'\"“]+)?"
    r"(?P<op>[ \t]+(?:is|was)(?:[ \t]*:)?[ \t]*|[ \t]*[:=][ \t]*|[ \t]+(?=['\"“]))"
)
_PROSE_SECRET_VALUE_RE = re.compile(
    r"\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|“(?P<cq>[^”\n]+)”|(?P<bare>[^\s\"'`“]+)"
)
_DIGITS_CODE = re.compile(r"[0-9]{4,12}#?|[0-9]{2,4}(?:-[0-9]{2,4}){1,3}")
_NOT_A_VALUE = re.compile(
    r"v?[0-9]+(?:\.[0-9]+)+[a-z]*"  # a version, a voltage: "2.31.0", "3.3V"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}.*"  # a date
    r"|[0-9]{1,2}:[0-9]{2}.*"  # a time
)
_UNIT_AFTER = re.compile(
    r"[ \t]*(?:\+|-|or|to)?[ \t]*(?:digits?|characters?|chars?|letters?|numbers?|words?"
    r"|days?|hours?|minutes?|weeks?|months?|years?|times?|attempts?|tries)\b"
)


def _prose_secret(value: str, quoted: bool, code: bool) -> bool:
    """Given the value after "the passphrase is" (`code`: after "my PIN is", "the door code
    is"), return True when it reads as the credential itself.

    A PIN or code is 4-12 digits (or digit groups: "12-34-56"). A quoted password is 6+
    characters and not a single lowercase word ('hidden' in the UI); several words in quotes
    are a passphrase. A bare password is 6+ characters with two character classes or all
    digits, and is not a word, a count ("12+chars"), a version, a date or a Wi-Fi term.
    """
    if code:
        return _DIGITS_CODE.fullmatch(value) is not None
    if len(value) < 6 or _is_placeholder(value):
        return False
    if quoted:
        words = value.split()
        return not (len(words) == 1 and value.isalpha() and value.islower()) and (
            len(words) == 1 or len(words) >= 3 or _classes(value) >= 2
        )
    if _NOT_A_VALUE.fullmatch(value) or _COUNT_WORD.match(value):
        return False
    if value.isdigit():
        return True  # "the password is 739155"
    if _classes(value) < 2 or value.isalpha():
        return False  # a word ("randomly", "Bitwarden")
    parts = [p.strip(_TRAILING) for p in _SPLIT_PARTS.split(value)]
    if any(p.lower() in _WIFI_TERMS for p in parts):
        return False  # "WPA2-PSK": the kind of key
    # A lowercase word as a part ("P@ssw0rd-like,", "2FA-enabled") makes it prose.
    return not any(len(p) >= 4 and p.isalpha() and p.islower() for p in parts)


def _prose_secrets(text: str, low: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "password in prose" for "the passphrase is: x7!Qz#9$Lm&" and "PIN or access code"
    for "my PIN is 4821", when the value reads as one (`_prose_secret`)."""
    for m in _PROSE_PW_RE.finditer(low):
        v = _PROSE_SECRET_VALUE_RE.match(text, m.end())
        if v is None or _overlaps(m.start(), v.end(), spans):
            continue
        code = m["code"] is not None
        if m["code"] in ("code", "combination"):
            before = low[max(0, m.start() - 10) : m.start()].split()
            if not before or before[-1] not in _CODE_OWNERS:
                continue  # "the exit code is 3", "the error code is 0x8007"
        bare_pass = m["pw"] == "pass"
        if bare_pass and ":" not in m["op"] and "=" not in m["op"]:
            continue  # "the test pass is ...": only "pass: <value>" names a password
        quoted = v["dq"] or v["sq"] or v["cq"]
        if quoted:
            value = quoted.strip()
        else:
            value = v["bare"]
            # Sentence punctuation ends a value only when what is left still reads as one:
            # "hunter22." is "hunter22", "p@55w0rd!!" keeps its "!!".
            stripped = value.rstrip(_TRAILING)
            if stripped != value and _prose_secret(stripped, False, code):
                value = stripped
        if not value or _UNIT_AFTER.match(text, v.end()):
            continue  # "the PIN is 1234 digits"? a length, not a PIN
        if bare_pass and not quoted and _classes(value) < 3:
            continue
        if _prose_secret(value, bool(quoted), code):
            found.add(_PIN if code else _PROSE_PW)
            spans.append((m.start(), v.end()))
