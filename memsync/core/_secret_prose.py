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

from memsync.core._secret_shapes import (
    _BACKTICK_PW,
    _CLI_PW,
    _GENERATED_IN_PROSE,
    _PIN,
    _PROSE_PW,
    _WIFI,
    _classes,
)
from memsync.core._secret_values import _SPLIT_PARTS, _TRAILING, _is_placeholder, _overlaps
from memsync.core.lazyre import LazyPattern

# `mysql -u root -pS3cret`: the password is glued to "-p" ("-p" alone prompts for it, "-P" is
# the port). Only options may stand between the command and "-p" (each short one with at most
# one argument), so "mysql ... and pytest -pno:cacheprovider" is not read as one command.
_ARG = r"[^\s;|&`<>]"
_MYSQL_PW_RE = LazyPattern(
    r"(?<![\w.-])(?:mysql(?:dump|admin|import|check|show|pump|binlog|slap)?"
    r"|mariadb(?:-?dump|-?admin)?)"
    r"(?:[ \t]+(?:-[A-Za-oq-z]" + _ARG + r"*(?:[ \t]+[^\s;|&`<>-]" + _ARG + r"*)?"
    r"|--[A-Za-z][\w-]*(?:=" + _ARG + r"*)?))*?"
    r"[ \t]+-p(?:\"(?P<dq>[^\"\s]+)\"|'(?P<sq>[^'\s]+)'|(?P<bare>" + _ARG + r"+))"
)
# "the wifi password is Tr0ub4dor&3", "Wi-Fi password: hunter2hunter2", "wifi pw is ...",
# "the password for the guest wifi is ...". Runs on `text.lower()`.
_IS_OPERATOR = r"(?:[ \t]+(?:is|was)(?:[ \t]*:)?|[ \t]*[:=])[ \t]*"
_WIFI_RE = LazyPattern(
    r"(?:(?:wi-?fi|wlan)(?:[ \t]+(?:network|guest|router))?[ \t]+"
    r"(?:password|passwd|passphrase|pass|pwd|pw|key)"
    r"|(?:password|passphrase|pw)[ \t]+(?:for|of)[ \t]+(?:(?:the|our|my)[ \t]+)?(?:guest[ \t]+)?"
    r"(?:wi-?fi|wlan)(?:[ \t]+network)?)" + _IS_OPERATOR
)
_PROSE_VALUE_RE = LazyPattern(
    r"\"(?P<dq>[^\"\s]+)\"|'(?P<sq>[^'\s]+)'|`(?P<bq>[^`\n]+)`|(?P<bare>[^\s\"'`]+)"
)
# "the passphrase is `correct horse battery staple`", "password for the NAS: `hunter22`".
# Runs on `text.lower()`; the value is read from `text` after the opening backtick.
_BACKTICK_PW_RE = LazyPattern(
    r"(?:password|passwd|passphrase|pass[ \t]+phrase|pwd|pw)"
    r"(?:[ \t]+for[ \t]+[^\s`]+(?:[ \t]+[^\s`]+){0,3}?)?" + _IS_OPERATOR + "`"
)
_BACKTICK_VALUE_RE = LazyPattern(r"[^`\n]+(?=`)")
# A command in backticks fetches the password rather than being it ("`pass show db`").
# fmt: off
_SECRET_COMMANDS = frozenset((
    "pass", "gopass", "op", "bw", "lpass", "security", "secret-tool", "keyring", "vault",
    "aws", "gcloud", "az", "kubectl", "cat", "echo", "sops", "age", "gpg", "openssl",
))
# fmt: on


_COUNT_WORD = LazyPattern(r"[0-9]+[^A-Za-z0-9]*[a-z]+\Z")
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
_PW_WORD = r"pass(?:word|wd|phrase)?|pass[ \t]+phrase|pwd|pw|psk"
# Every branch starts with "p", "c", "t", "s" or "k": the regex engine scans for those
# letters only. "code", "combination", "key" and "phrase" count after one of their owners
# ("the door code is", "the API key is", "the seed phrase is"), "token" and "secret" alone.
_CODE_WORD = r"passcode|pin(?:[ \t]+(?:code|number))?|codes?|combination"
_CREDENTIAL_WORD = r"token|secret|key|phrase"
# fmt: off
_OWNERS = {
    "code": frozenset(
        (
            "door", "alarm", "gate", "garage", "keypad", "lock", "safe", "entry", "access",
            "security", "recovery", "backup", "2fa", "mfa",
        )
    ),
    "key": frozenset(
        (
            "api", "access", "secret", "encryption", "private", "signing", "license",
            "licence", "master", "product", "decryption", "aes", "hmac",
        )
    ),
    "phrase": frozenset(("seed", "recovery", "mnemonic", "backup")),
}
# fmt: on
_OWNERS["codes"] = _OWNERS["combination"] = _OWNERS["code"]
_PROSE_PW_RE = LazyPattern(
    r"(?<![a-z0-9_@.-])(?:(?P<pw>" + _PW_WORD + r")|(?P<code>" + _CODE_WORD + r")"
    r"|(?P<tok>" + _CREDENTIAL_WORD + r"))s?"
    r"(?:[ \t]+(?:for|to|of|on)[ \t]+(?:[^\s:=`'\"“]+[ \t]+){0,3}?[^\s:=`'\"“]+)?"
    r"(?:[ \t]*\([^()\n]{1,30}\))?"  # "password (prod) is"
    r"(?P<op>[ \t]+(?:is|was|are)(?:[ \t]*:)?[ \t]*|[ \t]*[:=][ \t]*|[ \t]+(?=['\"“])"
    r"|[ \t]+(?:-|–|—|->|→|=>)[ \t]+)"
)
# "log in as admin with password S3cure!Pass": a password name, a space, a value that must
# then mix 3 character classes (a separate pattern: as an alternative operator of the one
# above, a bare space would end its "for <words>" part too early).
# "set MYSQL_ROOT_PASSWORD to S3cr3t!x" too: an environment variable's name, "to" or "as".
_SPACED_PW_RE = LazyPattern(
    r"(?<![a-z0-9_@.-])(?:[a-z0-9]+_)*(?P<pw>password|passwd|passphrase|pwd|pw)"
    r"(?:[ \t]+(?:to|as))?[ \t]+"
)
_PROSE_SECRET_VALUE_RE = LazyPattern(
    r"\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|“(?P<cq>[^”\n]+)”|(?P<bare>[^\s\"'`“]+)"
)
_DIGITS_CODE = LazyPattern(
    r"[0-9]{4,12}#?|[0-9]{2,4}(?:-[0-9]{2,4}){1,3}"
    r"|(?=[A-Za-z-]*[0-9])(?=[0-9-]*[A-Za-z])[A-Za-z0-9]{4,5}(?:-[A-Za-z0-9]{4,5}){2,4}"
)
_NOT_A_VALUE = LazyPattern(
    r"v?[0-9]+(?:\.[0-9]+)+[a-z]*"  # a version, a voltage: "2.31.0", "3.3V"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}.*"  # a date
    r"|[0-9]{1,2}:[0-9]{2}.*"  # a time
)
_UNIT_AFTER = LazyPattern(
    r"[ \t]*(?:\+|-|or|to)?[ \t]*(?:digits?|characters?|chars?|letters?|numbers?|words?"
    r"|days?|hours?|minutes?|weeks?|months?|years?|times?|attempts?|tries)\b"
)
_CLAUSE_END = LazyPattern(r"[ \t]*(?:[.!;,)]|\Z)")
_APP_PASSWORD = LazyPattern(r"[a-z]{4}(?: [a-z]{4}){3}(?![A-Za-z0-9])")
_HEX = LazyPattern(r"(?:0x)?[0-9a-f]{16,}")
_WORDS_AND_A_NUMBER = LazyPattern(r"(?=.*-[0-9]+(?:-|\Z))[a-z]+(?:-[a-z0-9]+){3,}")


def _prose_secret(value: str, quoted: bool, code: bool) -> bool:
    """Given the value after "the passphrase is" (`code`: after "my PIN is", "the door code
    is"), return True when it reads as the credential itself.

    A PIN or code is 4-12 digits, or digit groups ("12-34-56"), or a recovery code's
    groups ("7F3K-9QX2-LM4P"). A quoted password is 6+ characters and not a single
    lowercase word ('hidden' in the UI: see `_prose_secrets`); several words in quotes are
    a passphrase. A bare password is 6+ characters with two character classes or all
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
    if _WORDS_AND_A_NUMBER.fullmatch(value):
        return True  # "correct-horse-battery-staple-42", a passphrase
    if _classes(value) < 2 or value.isalpha():
        return False  # a word ("randomly", "Bitwarden")
    parts = [p.strip(_TRAILING) for p in _SPLIT_PARTS.split(value)]
    if any(p.lower() in _WIFI_TERMS for p in parts):
        return False  # "WPA2-PSK": the kind of key
    # A lowercase word as a part ("P@ssw0rd-like,", "2FA-enabled") makes it prose.
    return not any(len(p) >= 4 and p.isalpha() and p.islower() for p in parts)


def _token_value(value: str, quoted: bool, phrase: bool) -> bool:
    """Given the value after "the API key is" / "the token is" / "the seed phrase is",
    return True when it looks generated (`_looks_random`, or 16+ hex digits) or, after a
    seed or recovery phrase, is a quoted list of 12+ words."""
    if phrase:
        return quoted and len(value.split()) >= 12
    if len(value) < 8 or _is_placeholder(value):
        return False
    if _HEX.fullmatch(value.lower()) and not value.isdigit():
        return True
    parts = [p.strip(_TRAILING) for p in _SPLIT_PARTS.split(value)]
    if any(len(p) >= 4 and p.isalpha() and p.islower() for p in parts):
        return False
    return _classes(value) >= 3 or (len(value) >= 16 and _classes(value) >= 2 and _digits(value))


def _digits(value: str) -> bool:
    return any(c.isdigit() for c in value)


def _owner_ok(low: str, start: int, word: str) -> bool:
    """Whether the credential word at `start` has the owner its kind needs ("door" before
    "code"): always for words without an owner table."""
    owners = _OWNERS.get(word)
    if owners is None:
        return True
    before = low[max(0, start - 14) : start].split()
    return bool(before) and before[-1] in owners


def _prose_secrets(text: str, low: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "password in prose" for "the passphrase is: x7!Qz#9$Lm&", "PIN or access code"
    for "my PIN is 4821" and "secret in prose" for "the API key is Xk29fLq8Zp03Vm71Rt55",
    when the value reads as one (`_prose_secret`, `_token_value`). Without "is", ":" or
    "=" ("log in with password S3cure!Pass") a bare value must mix 3 character classes."""
    for m in (*_PROSE_PW_RE.finditer(low), *_SPACED_PW_RE.finditer(low)):
        v = _PROSE_SECRET_VALUE_RE.match(text, m.end())
        if v is None or _overlaps(m.start(), v.end(), spans):
            continue
        groups = m.groupdict()
        code, tok = groups.get("code"), groups.get("tok")
        word: str = m["pw"] or code or tok or ""
        if not _owner_ok(low, m.start(), word):
            continue  # "the exit code is 3", "the sort key is name"
        op = groups.get("op") or ""
        spaced = not op.strip()  # "password S3cure!Pass", "password 'S3cr3t!x'"
        quoted = v["dq"] or v["sq"] or v["cq"]
        if word == "pass" and ":" not in op and "=" not in op:
            continue  # "the test pass is ...": only "pass: <value>" names a password
        if m["pw"] and not quoted and low.endswith("app ", 0, m.start()):
            app = _APP_PASSWORD.match(text, m.end())
            if app:  # a Google app password: "abcd efgh ijkl mnop"
                found.add(_PROSE_PW)
                spans.append((m.start(), app.end()))
                continue
        if quoted:
            value = quoted.strip()
        else:
            value = v["bare"]
            stripped = value.rstrip(_TRAILING)
            # Sentence punctuation ends a value only when what is left still reads as one:
            # "hunter22." is "hunter22", "p@55w0rd!!" keeps its "!!".
            if stripped != value and _prose_secret(stripped, False, code is not None):
                value = stripped
        if not value or _UNIT_AFTER.match(text, v.end()):
            continue  # "the PIN is 1234 digits"? a length, not a PIN
        if spaced and not quoted and (code or tok or _classes(value) < 3 or len(value) < 8):
            continue
        if word == "pass" and not quoted and _classes(value) < 3:
            continue
        if tok:
            stripped = value.rstrip(_TRAILING)
            if _token_value(stripped if not quoted else value, bool(quoted), word == "phrase"):
                found.add(_GENERATED_IN_PROSE)
                spans.append((m.start(), v.end()))
            continue
        single_word = quoted and value.isalpha() and value.islower() and len(value) >= 6
        if m["pw"] and single_word and _CLAUSE_END.match(text, v.end()):
            ok = True  # "The password is 'letmein'." (but 'hidden' in the UI is prose)
        else:
            ok = _prose_secret(value, bool(quoted), code is not None)
        if ok:
            found.add(_PIN if code else _PROSE_PW)
            spans.append((m.start(), v.end()))


# `curl -u admin:S3cr3tPass https://...`: a password after the user name of -u/--user.
_CURL_USER_RE = LazyPattern(
    r"(?<![\w.-])curl\b[^\n|;&]*?[ \t](?:-u|--user)(?:[ \t]+|=)[\"']?[^\s:\"'$]+:"
    r"(?P<v>[^\s\"'@]+)"
)


def _curl_password(text: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "password on a command line" for `curl -u user:password`."""
    for m in _CURL_USER_RE.finditer(text):
        value = m["v"].rstrip(_TRAILING)
        if len(value) >= 4 and not _is_placeholder(value) and not _overlaps(*m.span(), spans):
            found.add(_CLI_PW)
            spans.append(m.span())


# `docker login -u deploy -p S3cr3t!Pass`, `sshpass -p 'S3cret!x9' ssh host`.
_LOGIN_PW_RE = LazyPattern(
    r"(?<![\w.-])(?:(?:docker|podman|helm)[ \t]+(?:registry[ \t]+)?login\b[^\n|;&]*?[ \t]"
    r"(?:-p|--password)(?:[ \t]+|=)|sshpass[ \t]+-p[ \t]*)"
    r"(?:\"(?P<dq>[^\"\s]+)\"|'(?P<sq>[^'\s]+)'|(?P<bare>[^\s;|&`<>]+))"
)
# "credentials: admin / Xy7$kk2!q", "smtp login: bot@example.com / M4il!Pass", "login
# admin:Xy7$kk2!q": a user name, "/" or ":", a password that mixes 3 character classes.
_USER_PW_RE = LazyPattern(
    r"(?<![a-z0-9_-])(?:credentials?|creds|login|log[ \t]+in)(?:[ \t]+(?:is|are)|[ \t]*[:=])?"
    r"[ \t]*[^\s/:\"'`]+(?:[ \t]*/[ \t]*|:)(?P<v>[^\s\"'`]+)"
)


def _login_passwords(text: str, low: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "password on a command line" for `docker login -p <value>` and `sshpass -p
    <value>`, and "password in prose" for a user and password pair after "credentials" or
    "login" whose password mixes 3 character classes."""
    if "login" in low or "sshpass" in low:
        for m in _LOGIN_PW_RE.finditer(text):
            value = m["dq"] or m["sq"] or m["bare"].rstrip(_TRAILING)
            if len(value) >= 4 and not _is_placeholder(value) and not _overlaps(*m.span(), spans):
                found.add(_CLI_PW)
                spans.append(m.span())
    for m in _USER_PW_RE.finditer(low):
        value = text[m.start("v") : m.end("v")].rstrip(_TRAILING)
        if (
            len(value) >= 8
            and _classes(value) >= 3
            and "//" not in value
            and not _is_placeholder(value)
            and not _overlaps(*m.span(), spans)
        ):
            found.add(_PROSE_PW)
            spans.append(m.span())
