"""Why an SSH login failed, in one line that names the remote and says what to do.

paramiko reports a failed login as the last error it met while trying each key: "No
authentication methods available" (no key at all), "Private key file is encrypted",
"Authentication failed", or for an encrypted RSA key even "encountered RSA key, expected
OPENSSH key" (its last key class's complaint). None names the key or the remedy (issue 13,
item 21). After a failed login this module looks at what there was to log in with (the
key files, ssh-agent's keys) and says which was missing, unusable or refused.

memsync logs in with keys only and never asks for a passphrase: a daemon has no one to ask.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import paramiko

__all__ = ["DEFAULT_KEY_FILES", "login_failure"]

DEFAULT_KEY_FILES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519")
"""The key files paramiko tries when no identity file is set (`look_for_keys`)."""

_KEY_CLASSES = tuple(
    getattr(paramiko, name)
    for name in ("RSAKey", "ECDSAKey", "Ed25519Key")
    if hasattr(paramiko, name)
)


def _key_problem(path: str) -> str | None:
    """Why the private key file `path` cannot be used for a login, or None when it loads."""
    encrypted = False
    for key_class in _KEY_CLASSES:
        try:
            key_class.from_private_key_file(path)
        except paramiko.PasswordRequiredException:
            encrypted = True
        except paramiko.SSHException:
            continue  # another class's format: paramiko tries each, so do we
        except FileNotFoundError:
            return f"the key file {path} does not exist"
        except OSError as exc:
            return f"the key file {path} cannot be read ({exc.strerror or exc})"
        else:
            return None
    if encrypted:
        return (
            f"the key file {path} is encrypted: load it into ssh-agent (ssh-add {path}); "
            "memsync does not ask for passphrases"
        )
    return f"{path} is not a private key file (RSA, ECDSA or Ed25519, OpenSSH or PEM format)"


def _agent_key_count() -> int:
    """How many keys ssh-agent offers (0 without an agent)."""
    if not os.environ.get("SSH_AUTH_SOCK"):
        return 0
    agent = paramiko.Agent()
    try:
        return len(agent.get_keys())
    except paramiko.SSHException:
        return 0
    finally:
        agent.close()


def login_failure(
    url: str, host: str, user: str, identity_files: Sequence[str], exc: BaseException
) -> str:
    """The message for a login to `url` as `user` that failed with `exc`.

    `identity_files` are the key files memsync gave paramiko (empty: paramiko looked for
    `DEFAULT_KEY_FILES` itself). The message says which keys there were and what to do:
    set `identity_file`, load an encrypted key into ssh-agent, or install the public key
    on `host`.
    """
    if isinstance(exc, paramiko.BadAuthenticationType) and "publickey" not in exc.allowed_types:
        allowed = ", ".join(exc.allowed_types) or "none"
        return (
            f"{url}: the server takes no key logins for {user} (only: {allowed}); "
            "memsync logs in with keys only: allow publickey in the server's sshd_config"
        )
    files = list(identity_files) or [
        p for p in map(os.path.expanduser, DEFAULT_KEY_FILES) if os.path.exists(p)
    ]
    checked = {f: _key_problem(f) for f in files}
    problems = [p for p in checked.values() if p is not None]
    tried = [f for f, problem in checked.items() if problem is None]
    agent_keys = _agent_key_count()
    if not tried and not agent_keys:
        if problems:
            return f"{url}: {'; '.join(problems)}"
        return (
            f"{url}: no key to log in with as {user}: set identity_file = "
            '"~/.ssh/id_ed25519" on this remote (or IdentityFile in ~/.ssh/config), or '
            "load the key into ssh-agent"
        )
    if agent_keys:
        tried.append(f"{agent_keys} ssh-agent key{'s' if agent_keys > 1 else ''}")
    refused = (
        f"{url}: {host} refused the login as {user} with {', '.join(tried)}: add the public "
        f"key to ~{user}/.ssh/authorized_keys there, or set user or identity_file"
    )
    return f"{refused} (also: {'; '.join(problems)})" if problems else refused
