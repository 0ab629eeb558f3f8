"""Credential detection: the spec's "never store secrets, passwords or tokens in a memory file".

`find_secrets(text)` names the credential-shaped values in one entry text. It looks for the
*shape of a value* (a provider's token prefix, a PEM header, `password=<value>`, a password
inside a URL, `mysql -p<value>`, a value after "the wifi password is"), never for words:
"Rotate API keys every month" or "the password field is called pw" are ordinary memories
and must pass. Precision comes before recall, because a
false alarm refuses a harmless memory while a miss is still caught by the person reviewing
it; so a bare high-entropy string with no prefix or key name is not reported.

Speed: `memsync check` runs this over every line of a file (about 3 µs for a typical
150-character sentence). One prefilter regex, scanned for a few characters rare in prose,
decides whether any provider pattern or command-line/prose check can match; key
assignments are found from their `=`/`:` operator backwards; the other checks run only when
a trigger word such as "bearer" or "://" occurs ("wifi" is one substring test too: an anchor
starting at "f" would stop the scan too often).

Decisions on borderline values (pinned by tests/core/test_secrets.py):
- A default or weak password is still a password: `password=changeme`,
  `amqp://guest:guest@host` are reported. Only words that *describe* a value are
  placeholders: `password=<redacted>`, `***`, `xxx`, `${VAR}`, `$VAR`, `{{ var }}`,
  `YOUR_API_KEY`, `your-token-here`, `password=password`, `null`, `required`, ...
- `key: value` with a space after the operator is how prose reads ("Password: required for
  admins"), so a bare value there must look random (mixed classes, or long with digits);
  quoted values and values written right after `=`/`:` only need 6 characters.
- Values that are references, not secrets, pass: environment variables, template
  expressions, function calls, dotted attribute names, file paths, `op://`/`vault:`/`arn:`
  references. So do values under 6 characters (`password=admin`), all-letter values that
  name themselves (`secret=mysecret`), and word-only values of non-password keys
  (`AccessToken=minutes`): a password can be a word, a token cannot.
- Provider-shaped keys are reported even when they are documentation samples
  (AWS's published sample key id): the shape is what the person should not paste. Shapes
  are checked as far as cheaply possible: a Telegram token's secret starts with "AA"; a
  Discord token's first part must decode to a 17-20 digit account id; an Azure SAS
  signature counts only beside its "sv=" version.
- `mysql -p<value>` (and mysqldump, mariadb...) has no prose reading, so 4 characters
  suffice (`-proot`); placeholders follow the rules above (`-pPASSWORD`, `-psecret`,
  `-p$PW` pass, as `password=secret` does). Only options may stand between the command and
  `-p`, so "mysql ... and pytest -pno:cacheprovider" is not one command. `--password=` is a
  password assignment.
- A value after "the wifi password is" / "Wi-Fi password:" is reported when quoted (6+
  characters) or when it is a bare 8+ character token with digits or symbols that is not
  a word or a phrase: "on the fridge", "printed", "WPA2-protected", "12+chars" and the kind
  of key ("WPA2-PSK") pass.
- A passphrase may be several words, so a backticked value after "password/passphrase
  is" or ":" is reported when it is 6+ characters and no placeholder, option or command
  ("`pass show db/prod`", "`--password-stdin`", "`$DB_PASSWORD`"). A value reported as an
  assignment ("password: `hunter22`") is not reported again by these prose checks.
- A password, passphrase, PIN or door code given in prose ("the passphrase is: x7!Qz#9$Lm&",
  "password for the NAS = 'p@55;w0rd!!'", "my PIN is 4821", issue 24) is reported when
  the value reads as the credential: quoted (6+ characters, not one lowercase word), or
  bare with 6+ characters and two character classes (or all digits), and no lowercase
  word, count, version, date or time ("is randomly generated", "is 12+chars", "is
  e-mailed", "was changed on 2024-03-01"). A PIN or code is 4-12 digits. A trailing
  sentence mark is dropped only when what is left still reads as one ("hunter22." but
  "p@55w0rd!!"). `tests/core/test_secret_prose.py` pins both corpora.
- A token, secret or key given in prose ("the API key for the weather service is
  Xk29fLq8Zp03Vm71Rt55", "TOTP secret is JBSWY3DPEHPK3PXP") is reported when the value looks
  generated (as after "key: ", or 16+ hex digits); "key" and "phrase" count only after a
  word naming a credential ("API key", "seed phrase"), so "the sort key is (scope, id)"
  and "the key is idempotency" pass. Recovery and backup codes ("7F3K-9QX2-LM4P") are
  codes; `curl -u user:password` is a password on a command line.
- memsync's own hub key (`msk1-` and 43 base64url characters, as `memsync key show`
  prints it) is a credential wherever it appears (issue 24, item 5).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import msgspec

from memsync.core._secret_prose import (
    _backtick_password,
    _curl_password,
    _login_passwords,
    _mysql_password,
    _prose_secrets,
    _wifi_password,
)
from memsync.core._secret_shapes import (
    _BASIC,
    _BEARER,
    _DETECTORS,
    _KEY_ASSIGN,
    _ORDER,
    _PREFILTER,
    _PW_ASSIGN,
    _URL_CRED,
    SECRET_KINDS,
    _classes,
    _plausible,
)
from memsync.core._secret_values import _TRAILING, _is_placeholder, _looks_random, _overlaps
from memsync.core.lazyre import LazyPattern

__all__ = ["SECRET_KINDS", "find_secrets", "record_secrets"]

# --- Values that need judging: bearer tokens, URL passwords, key assignments ----------------
# The key parts of these patterns run on `text.lower()` without (?i): a case-insensitive
# alternation defeats the regex engine's first-character scan and costs ~10x more.

_BEARER_RE = LazyPattern(r"bearer[ \t]+")
_AUTH_BEFORE_RE = LazyPattern(r"authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?\Z")
_B64_TOKEN_RE = LazyPattern(r"[A-Za-z0-9._~+/-]+=*")
_BASIC_RE = LazyPattern(r"authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?basic[ \t]+")
_B64_RE = LazyPattern(r"[A-Za-z0-9+/]{8,}={0,2}")
_URL_CRED_RE = LazyPattern(r"://[^\s:/@?#]*:(?P<v>[^\s/@?#]+)@[A-Za-z0-9\[]")

# Assignments are found from their operator backwards: operators are rare in prose, while
# a regex for the key names would try a match at nearly every letter of a sentence.
_OPERATOR_RE = LazyPattern(r":=|=>|==?|:")
_PW_NAMES = ("password", "passwd", "passphrase", "pwd")
_KEY_NAMES = (*_PW_NAMES, "secret", "token", "credential", "credentials", "key")
# "*key" names must have one of these words before "key" ("sort key: name" is no secret).
# Word tables keep several words per line.
# fmt: off
_KEY_OWNERS = (
    "api", "access", "auth", "private", "secret", "signing", "encryption", "master", "client",
)
_ASSIGNMENT_VALUE_RE = LazyPattern(
    r"(?P<sp>[ \t]*)(?:"
    r"\\?\"(?P<dq>[^\"\s\\]*)\\?\""  # "value", or \"value\" inside a raw JSON line
    r"|'(?P<sq>[^'\s]*)'"
    r"|`(?P<bq>[^`\s]*)`"
    # Bare values stop at "," ";" "&" ("a=1&token=x", "k=v, k2=v2"); one with "=" inside is
    # code ("startToken:Token=None"), base64 has "=" only at its end.
    r"|(?P<bare>[^\s\"'`,;&=]+=*)(?![^\s\"'`,;&]))"
)
# Tokens that are protocol data, not credentials: pagination cursors, idempotency keys,
# LLM token counts ("nextToken", "page_token", "ClientToken", "max_token").
_NON_SECRET_TOKEN_OWNERS = (
    "next", "page", "continuation", "client", "idempotency", "sync", "cursor", "pagination",
    "request", "max", "min", "num", "total", "input", "output", "prompt", "completion", "stop",
    "eos", "bos", "pad", "unk", "sep", "change", "creation", "update", "forward", "backward",
    "resume", "publickey",
)
# fmt: on


def _assignment_key(low: str, end: int) -> tuple[int, str] | None:
    """Given the index of an assignment operator in `low`, return the start of the credential
    key name written before it (`password`, `DB_PASSWORD`, `"apiKey"`, `secret_key`) and that
    name, or None when the key names no credential."""
    j = end
    while j and low[j - 1] in " \t":
        j -= 1
    if j and low[j - 1] in "\"'":
        j -= 1
    if j and low[j - 1] == "\\":
        j -= 1
    if not low.endswith(_KEY_NAMES, 0, j):
        return None
    name = next(k for k in _KEY_NAMES if low.endswith(k, 0, j))
    start = j - len(name)
    if name == "key":
        # "api_key", "apiKey", "secret-key": the word before "key" must name a credential.
        before = low[max(0, start - 16) : start]
        owner = before.rstrip("_-")
        word = next((o for o in _KEY_OWNERS if owner.endswith(o)), None)
        if word is None:
            return None
        start -= len(before) - len(owner) + len(word)
    elif name == "token":
        owner = low[max(0, start - 16) : start].rstrip("_- ")
        if owner.endswith(_NON_SECRET_TOKEN_OWNERS):
            return None
    ident = start
    while ident and (low[ident - 1].isalnum() or low[ident - 1] in "_.-"):
        ident -= 1
    if ident and low[ident - 1] in ":/":
        return None  # "arn:aws:...:secret:name", "AWS::MSK::BatchScramSecret": resource names
    return start, name


def _assignments(text: str, low: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "password assignment" / "secret assignment" to `found` for each `key=value` whose
    value is present and is not a placeholder. `low` is `text.lower()`, index-aligned with
    `text`. A value already reported by a specific detector (`spans`) is not reported twice."""
    for op in _OPERATOR_RE.finditer(text):
        key = _assignment_key(low, op.start())
        if key is None:
            continue
        start, key_name = key
        password = key_name in _PW_NAMES
        name = _PW_ASSIGN if password else _KEY_ASSIGN
        v = _ASSIGNMENT_VALUE_RE.match(text, op.end())
        if v is None:
            continue
        quoted = next((q for q in (v["dq"], v["sq"], v["bq"]) if q is not None), None)
        value = quoted if quoted is not None else v["bare"].rstrip(_TRAILING)
        if len(value) < 6 or _is_placeholder(value):
            continue
        if quoted is None and v["sp"] and not _looks_random(value):
            continue  # "Password: required for admins", "token = user_input"
        if not password and _classes(value) < 2:
            continue  # a password may be a word ("letmein"); a token never is ("minutes")
        if _overlaps(start, v.end(), spans):
            continue
        found.add(name)
        spans.append((start, v.end()))  # the prose checks below must not report it again


def _bearer(text: str, low: str, spans: list[tuple[int, int]], found: set[str]) -> None:
    """Add "bearer token" for `Authorization: Bearer <token>` (8+ chars) or a bare
    `bearer <token>` whose token looks generated (20+ chars)."""
    for m in _BEARER_RE.finditer(low):
        v = _B64_TOKEN_RE.match(text, m.end())
        if v is None:
            continue
        value = v[0]
        if _AUTH_BEFORE_RE.search(low, max(0, m.start() - 40), m.start()):
            ok = len(value) >= 8 and _classes(value) >= 2 and len(set(value)) >= 5
        else:
            ok = len(value) >= 20 and _looks_random(value)
        if ok and not _is_placeholder(value):
            found.add(_BEARER)
            spans.append((m.start(), v.end()))


def find_secrets(text: str) -> list[str]:
    """Return human-readable names of credential-shaped values found in `text`.

    Implements the spec rule "never store secrets, passwords or tokens in a memory file" for
    one entry text. Detection is by value shape (provider prefixes, PEM headers,
    `key=value` assignments, passwords in URLs and on mysql command lines, a Wi-Fi password
    or a backticked passphrase given in prose); mentioning a credential in words is fine.

    Args:
        text: the entry text (any string; typically one sentence).

    Returns:
        The names of the kinds found, each at most once, in the order of `SECRET_KINDS`;
        an empty list when the text is clean.

    Example:
        >>> find_secrets("Rotate API keys every month.")
        []
        >>> find_secrets("Use password=hunter22 for the staging box.")
        ['password assignment']
    """
    low = text.lower()
    if len(low) != len(text):
        # A few non-ASCII letters lower to two characters ("İ"); keep indexes aligned.
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    found: set[str] = set()
    spans: list[tuple[int, int]] = []
    anchored = _PREFILTER.search(text) is not None
    detectors = _DETECTORS if anchored else ()
    for det in detectors:
        haystack = low if det.folded else text
        if not any(t in haystack for t in det.triggers):
            continue
        for m in det.pattern.finditer(text):
            value = m["v"] if "v" in det.pattern.groupindex else None
            if value is None or (
                _plausible(value, det.classes) and (det.valid is None or det.valid(value))
            ):
                found.add(det.name)
                spans.append(m.span())
    if "bearer" in low:
        _bearer(text, low, spans, found)
    if "basic" in low and "authorization" in low:
        for m in _BASIC_RE.finditer(low):
            v = _B64_RE.match(text, m.end())
            if v and not _is_placeholder(v[0]) and len(set(v[0])) >= 5:
                found.add(_BASIC)
                spans.append((m.start(), v.end()))
    if "://" in text and "@" in text:
        for m in _URL_CRED_RE.finditer(text):
            value = m["v"]
            if len(value) >= 3 and not value.isdigit() and not _is_placeholder(value):
                found.add(_URL_CRED)
                spans.append(m.span())
    if "=" in text or ":" in text:
        _assignments(text, low, spans, found)
    if anchored or "wifi" in low:
        # Prose and command-line passwords come last: an assignment they overlap is
        # reported once, as the assignment.
        if "-p" in text and ("mysql" in text or "mariadb" in text):
            _mysql_password(text, spans, found)
        if "wifi" in low or "wi-fi" in low or "wlan" in low:
            _wifi_password(text, low, spans, found)
        if "`" in text and ("pass" in low or "pw" in low):
            _backtick_password(text, low, spans, found)
    if "-u" in text and "curl" in text:
        _curl_password(text, spans, found)
    if "-p" in text or "cred" in low or "login" in low or "log in" in low:
        _login_passwords(text, low, spans, found)
    if (
        "pass" in low
        or "pw" in low
        or "pin" in low
        or "code" in low
        or "combination" in low
        or "token" in low
        or "secret" in low
        or "key" in low
        or "phrase" in low
        or "psk" in low
    ):
        _prose_secrets(text, low, spans, found)
    return sorted(found, key=_ORDER.__getitem__)


# The fields of a record that are machine-written and checked for their shape by rule 3:
# no credential can hide in a timestamp, a kind, a boolean or a number.
_MACHINE_FIELDS = frozenset({"id", "created_at", "expires_at", "kind", "deleted", "confidence"})
_decode = msgspec.json.Decoder().decode
_KNOWN_FIELDS = frozenset({"text", "scope", "source", "supersedes", "tags"}) | _MACHINE_FIELDS


class _KnownOnly(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A record with no field but rule 3's: its human-written strings, typed loosely (the
    line is a valid record already); any other field fails the decode (`_strings` then)."""

    id: msgspec.Raw
    created_at: msgspec.Raw
    kind: msgspec.Raw = msgspec.Raw(b"null")
    deleted: msgspec.Raw = msgspec.Raw(b"null")
    confidence: msgspec.Raw = msgspec.Raw(b"null")
    expires_at: msgspec.Raw = msgspec.Raw(b"null")
    text: str | None = None
    scope: str = ""
    source: str | None = None
    supersedes: str | None = None
    tags: list[str] = []


_decode_known = msgspec.json.Decoder(_KnownOnly).decode


def record_secrets(raw: bytes) -> list[str]:
    """What looks like a credential anywhere in a record's line `raw` (a valid record,
    rule 4): its text, and every string of every other field but the machine-written ones
    (scope, source, tags, supersedes, and unknown fields, nested or not), decoded so that
    JSON escapes cannot hide a value. The short fields repeat across records (a session
    id, a scope), so their verdicts are cached.

    Used by `check` on a file, and on every record that arrives by merge or sync before it
    is merged or pushed (issue 13, item 6): see `memsync.core.merge`.
    """
    try:
        k = _decode_known(raw)
    except msgspec.ValidationError:  # unknown fields: walk every string
        obj = _decode(raw)
        text = obj.get("text")
        found = find_secrets(text) if type(text) is str else []
        for key, value in obj.items():
            if key != "text" and key not in _MACHINE_FIELDS:
                for string in _strings(value):
                    found += _field_secrets(string)
                if key not in _KNOWN_FIELDS:  # an unknown field's name is a string it holds
                    for string in _named(key, value):
                        found += _field_secrets(string)
        return list(dict.fromkeys(found))
    found = find_secrets(k.text) if k.text else []
    for value in (k.scope, k.source, k.supersedes, *k.tags):
        if value:
            found += _field_secrets(value)
    return list(dict.fromkeys(found)) if found else found


def _strings(value: object) -> Iterator[str]:
    """Every string in a JSON value, with every object's field names as `_named` reads
    them (issue 24, item 4: `{"AKIA...": "..."}` hides a key in a name)."""
    if type(value) is str:
        yield value
    elif type(value) is list:
        for item in value:
            yield from _strings(item)
    elif type(value) is dict:
        for key, item in value.items():
            yield from _named(key, item)
            yield from _strings(item)


def _named(key: str, value: object) -> Iterator[str]:
    """A field's name, and with a string value the pair as JSON spells it (`"db_password":
    "S3cr3t!x9"`), so that a name the key-assignment checks know carries its value."""
    yield key
    if type(value) is str:
        yield msgspec.json.encode({key: value}).decode()[1:-1]


@lru_cache(maxsize=4096)
def _field_secrets(value: str) -> list[str]:
    return find_secrets(value)
