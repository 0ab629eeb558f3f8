"""config.py: the example loads, every url form parses, every mistake names file and key."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from memsync.config import (
    CompactionConfig,
    Config,
    DaemonConfig,
    MemoryConfig,
    RemoteConfig,
    RemoteURL,
    default_config,
    default_config_path,
    default_state_dir,
    load_config,
    parse_remote_url,
)
from memsync.config.bridges import BridgeConfig
from memsync.errors import ConfigError
from tests.helpers.paths import ROOT

EXAMPLE = ROOT / "config.example.toml"
HOME = Path(os.path.expanduser("~"))

MINIMAL = """
[[memory]]
name = "me"
path = "/data/me.jsonl"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    error = info.value
    assert error.file == str(path)
    assert "\n" not in str(error)
    assert "pydantic" not in str(error)
    return error


# --- the example ----------------------------------------------------------------------


def test_example_loads_with_expected_values() -> None:
    config = load_config(EXAMPLE)
    assert config.state_dir == HOME / ".local/state/memsync"
    assert config.replica == "laptop"
    me, work = config.memory
    assert me == MemoryConfig(
        name="me", path=HOME / ".local/share/agent-memory/me.jsonl", remotes=("nas", "vm")
    )
    assert work.name == "work"
    assert work.remotes is None
    nas, vm, team = config.remote
    assert team.parsed_url == RemoteURL(scheme="s3", path="memsync", host="team-memory")
    assert (team.endpoint_url, team.region, team.profile) == (
        "https://s3.example.net",
        "eu-west-1",
        "memsync",
    )
    assert nas.name == "nas"
    assert nas.parsed_url == RemoteURL(scheme="file", path="/mnt/nas/memsync")
    assert nas.poll_seconds == 30
    assert nas.identity_file is None
    assert vm.parsed_url == RemoteURL(
        scheme="ssh", path="/home/me/memsync", host="vm.example.net", user="me", port=2222
    )
    assert vm.identity_file == HOME / ".ssh/id_ed25519"
    assert vm.known_hosts == HOME / ".ssh/known_hosts"
    assert vm.accept_new_host_key is False
    assert vm.poll_seconds == 60
    assert (nas.encrypt, vm.encrypt) == (False, True)  # issue 12
    assert config.compaction == CompactionConfig(
        schedule="17 3 * * *",
        quiet_seconds=60,
        max_postpone_seconds=86400,
        tombstone_horizon_days=90,
    )
    assert config.daemon == DaemonConfig(debounce_ms=200, log_level="info", reconcile_seconds=300)
    assert [r.name for r in config.memory_remotes(me)] == ["nas", "vm"]
    assert [r.name for r in config.memory_remotes("work")] == ["nas", "vm", "team"]
    [bridge] = config.bridge  # issue 22
    assert (bridge.memory, bridge.path, bridge.format) == (
        "me",
        HOME / ".codex/AGENTS.md",
        "agents-md",
    )
    assert (bridge.scope, bridge.min_confidence, bridge.budget) == ("project:web", 0.5, "150 lines")


def test_example_documents_every_key() -> None:
    """Each key of each model appears in the example as `key = `."""
    text = EXAMPLE.read_text(encoding="utf-8")
    for model in (Config, MemoryConfig, RemoteConfig, CompactionConfig, DaemonConfig, BridgeConfig):
        for key in model.model_fields:
            if key in ("memory", "remote", "bridge"):
                assert f"[[{key}]]" in text
            elif key in ("compaction", "daemon"):
                assert f"[{key}]" in text
            else:
                assert f"\n{key} = " in text, key


def test_display_dict_is_json_and_validates_again() -> None:
    config = load_config(EXAMPLE)
    shown = config.to_display_dict()
    json.dumps(shown)
    assert shown["memory"][1]["remotes"] == ["nas", "vm", "team"]
    assert "identity_file" not in shown["remote"][2]
    assert "endpoint_url" not in shown["remote"][1]
    assert shown["remote"][0] == {
        "name": "nas",
        "url": "/mnt/nas/memsync",
        "poll_seconds": 30.0,
        "encrypt": False,  # issue 12
    }
    assert shown["remote"][1]["identity_file"] == str(HOME / ".ssh/id_ed25519")
    assert shown["state_dir"] == str(HOME / ".local/state/memsync")
    again = Config.model_validate(shown)
    assert again.to_display_dict() == shown


# --- defaults -------------------------------------------------------------------------


def test_default_config() -> None:
    config = default_config()
    (memory,) = config.memory
    assert memory.name == "me"  # the tour's, the hook's, `mcp --memory me`'s (issue 24, 17)
    assert memory.path == HOME / ".local/share/agent-memory/me.jsonl"
    assert config.remote == ()
    assert config.memory_remotes(memory) == []
    assert config.compaction == CompactionConfig()
    assert config.compaction.schedule == "17 3 * * *"
    assert config.compaction.quiet_seconds == 60
    assert config.compaction.tombstone_horizon_days == 90
    assert config.daemon == DaemonConfig()
    assert config.replica is None
    assert config.state_dir.is_absolute()


def test_empty_file_is_the_default_config(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    beside = default_config().model_copy(update={"key_file": path.parent / "keys"})
    assert load_config(path) == beside  # keys beside the file read (issue 24, item 15)


def test_minimal_file_fills_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    assert config.memory[0].path == Path("/data/me.jsonl")
    assert config.daemon.debounce_ms == 200
    assert config.daemon.log_level == "info"
    assert config.daemon.reconcile_seconds == 300
    assert config.compaction.quiet_seconds == 60


def test_config_is_frozen(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL))
    with pytest.raises(ValueError, match="frozen"):
        config.replica = "x"


def test_tilde_expanded_everywhere(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            """
state_dir = "~/st"
[[memory]]
name = "m"
path = "~/mem/m.jsonl"
[[remote]]
name = "box"
url = "~/hub"
[[remote]]
name = "h"
url = "ssh://h/srv/hub"
identity_file = "~/.ssh/key"
known_hosts = "~/.ssh/kh"
""",
        )
    )
    assert config.state_dir == HOME / "st"
    assert config.memory[0].path == HOME / "mem/m.jsonl"
    assert isinstance(config.memory[0].path, Path)
    assert config.remote[0].parsed_url.path == str(HOME / "hub")
    assert config.remote[1].identity_file == HOME / ".ssh/key"
    assert config.remote[1].known_hosts == HOME / ".ssh/kh"


def test_default_config_path_env() -> None:
    assert default_config_path({"MEMSYNC_CONFIG": "/etc/m.toml"}) == Path("/etc/m.toml")
    assert default_config_path({"MEMSYNC_CONFIG": "~/m.toml", "XDG_CONFIG_HOME": "/x"}) == (
        HOME / "m.toml"
    )
    assert default_config_path({"XDG_CONFIG_HOME": "/xdg"}) == Path("/xdg/memsync/config.toml")
    assert default_config_path({}) == HOME / ".config/memsync/config.toml"
    # The XDG spec says a relative value is to be ignored.
    assert default_config_path({"XDG_CONFIG_HOME": "rel"}) == HOME / ".config/memsync/config.toml"
    assert default_config_path({"MEMSYNC_CONFIG": ""}) == HOME / ".config/memsync/config.toml"


def test_default_state_dir_env() -> None:
    assert default_state_dir({"XDG_STATE_HOME": "/s"}) == Path("/s/memsync")
    assert default_state_dir({}) == HOME / ".local/state/memsync"


# --- remote urls ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/mnt/nas/memsync", RemoteURL("file", "/mnt/nas/memsync")),
        ("~/hub", RemoteURL("file", str(HOME / "hub"))),
        ("file:///mnt/nas/memsync", RemoteURL("file", "/mnt/nas/memsync")),
        ("file://localhost/srv/hub", RemoteURL("file", "/srv/hub")),
        ("FILE:///a%20b", RemoteURL("file", "/a b")),
        (
            "ssh://user@host:2222/path",
            RemoteURL("ssh", "/path", host="host", user="user", port=2222),
        ),
        ("ssh://alias/path/to/hub", RemoteURL("ssh", "/path/to/hub", host="alias")),
        ("ssh://Host.Example/p", RemoteURL("ssh", "/p", host="host.example")),
        ("ssh://me@[::1]:22/p", RemoteURL("ssh", "/p", host="::1", user="me", port=22)),
        ("ssh://h/with%20space", RemoteURL("ssh", "/with space", host="h")),
        # Issue 13, item 23: in the login's home folder, as scp's host:~/hub.
        ("ssh://vm/~/memsync", RemoteURL("ssh", "~/memsync", host="vm")),
        ("ssh://me@vm:2222/~", RemoteURL("ssh", "~", host="vm", user="me", port=2222)),
        ("ssh://vm/~x/hub", RemoteURL("ssh", "/~x/hub", host="vm")),
    ],
)
def test_url_forms_parse(url: str, expected: RemoteURL) -> None:
    assert parse_remote_url(url) == expected


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("", "empty url"),
        ("relative/dir", "not an absolute path"),
        ("me@host:hub", "ssh://"),
        ("sftp://host/p", "unsupported url scheme 'sftp'"),
        ("http://host/p", "unsupported url scheme"),
        ("file://host/p", "three slashes"),
        ("file://~/hub", "three slashes"),
        ("ssh://host", "no path"),
        ("ssh://host/", "no path"),
        ("ssh:///path", "no host"),
        ("ssh://host:0/p", "port"),
        ("ssh://host:99999/p", "port"),
        ("ssh://host:abc/p", "port"),
        ("ssh://host:/p", "port"),
        ("ssh://-oProxyCommand=x/p", "invalid host"),
        ("ssh://host/p?x=1", "?query"),
        ("ssh://host/p#frag", "#fragment"),
        (" /mnt/x", "spaces"),
        ("/mnt/x\n", "control"),
    ],
)
def test_bad_urls_refused(url: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_remote_url(url)


def test_password_in_ssh_url_refused_without_echo(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no passwords in the config") as info:
        parse_remote_url("ssh://u:hunter2@h/p")
    assert "hunter2" not in str(info.value)
    error = config_error(
        tmp_path, MINIMAL + '[[remote]]\nname = "h"\nurl = "ssh://u:hunter2@h/p"\n'
    )
    assert error.key == "remote[0].url"
    assert error.message == "no passwords in the config; use a key or ssh-agent"
    assert "hunter2" not in str(error)


def test_bad_url_in_config_names_the_key(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        MINIMAL + '[[remote]]\nname = "a"\nurl = "/a"\n[[remote]]\nname = "b"\nurl = "x"\n',
    )
    assert error.key == "remote[1].url"
    assert "not an absolute path" in error.message


# --- unknown keys ---------------------------------------------------------------------


def test_unknown_top_level_key(tmp_path: Path) -> None:
    error = config_error(tmp_path, 'replika = "x"\n' + MINIMAL)
    assert error.key == "replika"
    assert error.message == "unknown key 'replika' (did you mean 'replica'?)"
    assert str(error) == f"{tmp_path / 'config.toml'}: replika: {error.message}"


def test_unknown_key_in_remote(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        MINIMAL + '[[remote]]\nname = "nas"\nurl = "/mnt/nas"\npoll_second = 5\n',
    )
    assert error.key == "remote[0].poll_second"
    assert error.message == "unknown key 'poll_second' (did you mean 'poll_seconds'?)"


def test_unknown_key_without_close_match_lists_known(tmp_path: Path) -> None:
    error = config_error(tmp_path, "[daemon]\nzzz = 1\n")
    assert error.key == "daemon.zzz"
    assert "unknown key 'zzz'" in error.message
    assert "debounce_ms, log_level, reconcile_seconds" in error.message


def test_unknown_table(tmp_path: Path) -> None:
    error = config_error(tmp_path, "[sync]\nx = 1\n")
    assert error.key == "sync"
    assert "unknown key 'sync'" in error.message


def test_password_key_does_not_exist(tmp_path: Path) -> None:
    error = config_error(
        tmp_path, MINIMAL + '[[remote]]\nname = "h"\nurl = "ssh://h/p"\npassword = "x"\n'
    )
    assert error.key == "remote[0].password"
    assert "no secrets in the config" in error.message  # refused by name (issue 11)


@pytest.mark.parametrize(
    "key", ["aws_secret_access_key", "aws_access_key_id", "secret", "password", "session_token"]
)
def test_secret_keys_are_refused_in_a_remote(tmp_path: Path, key: str) -> None:
    error = config_error(
        tmp_path,
        MINIMAL + f'[[remote]]\nname = "h"\nurl = "s3://bucket/p"\n{key} = "hunter2-secret"\n',
    )
    assert error.key == f"remote[0].{key}"
    assert "no secrets in the config" in error.message
    assert "hunter2" not in str(error)


def test_s3_remote(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        MINIMAL + '[[remote]]\nname = "s"\nurl = "s3://my-bucket/team/memsync/"\n'
        'endpoint_url = "http://127.0.0.1:8333"\nregion = "us-east-1"\nprofile = "p"\n'
    )
    (remote,) = load_config(path).remote
    assert remote.parsed_url == RemoteURL(scheme="s3", path="team/memsync", host="my-bucket")
    assert remote.endpoint_url == "http://127.0.0.1:8333"
    assert parse_remote_url("s3://my-bucket").path == ""


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://AB/p", "invalid bucket name"),
        ("s3://b/p", "invalid bucket name"),
        ("s3://key:hunter2@bucket/p", "no credentials in the url"),
        ("s3://bucket/a/../b", "invalid prefix"),
        ("s3://bucket/p?x=1", "?query"),
    ],
)
def test_bad_s3_urls(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        parse_remote_url(url)
    assert "hunter2" not in str(caught.value)


def test_s3_only_and_ssh_only_keys(tmp_path: Path) -> None:
    error = config_error(
        tmp_path, MINIMAL + '[[remote]]\nname = "h"\nurl = "/srv/hub"\nregion = "x"\n'
    )
    assert error.key == "remote[0].region"
    assert "applies to s3:// remotes only; this one is a folder" in error.message
    error = config_error(
        tmp_path,
        MINIMAL + '[[remote]]\nname = "h"\nurl = "s3://bucket/p"\nidentity_file = "/k"\n',
    )
    assert "applies to ssh:// remotes only; this one is an s3:// remote" in error.message
    error = config_error(
        tmp_path,
        MINIMAL + '[[remote]]\nname = "h"\nurl = "s3://bucket/p"\nendpoint_url = "ftp://x"\n',
    )
    assert "is not an http:// or https:// url" in error.message


# --- wrong types and values -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        (
            '[[remote]]\nname = "a"\nurl = "/a"\npoll_seconds = "30"\n',
            "remote[0].poll_seconds",
            "expected a number, got string '30'",
        ),
        (
            '[[remote]]\nname = "a"\nurl = "/a"\npoll_seconds = true\n',
            "remote[0].poll_seconds",
            "expected a number, got boolean True",
        ),
        ("[daemon]\ndebounce_ms = 1.5\n", "daemon.debounce_ms", "expected an integer"),
        ('[daemon]\ndebounce_ms = "200"\n', "daemon.debounce_ms", "expected an integer"),
        ("[daemon]\ndebounce_ms = -1\n", "daemon.debounce_ms", "greater than or equal to 0"),
        ('[daemon]\nlog_level = "INFO"\n', "daemon.log_level", "'debug', 'info'"),
        ("[daemon]\nreconcile_seconds = 0\n", "daemon.reconcile_seconds", "greater than 0"),
        ("[compaction]\nquiet_seconds = -1\n", "compaction.quiet_seconds", "greater than or"),
        (
            "[compaction]\ntombstone_horizon_days = 0\n",
            "compaction.tombstone_horizon_days",
            "greater than or equal to 1",
        ),
        (
            '[[remote]]\nname = "a"\nurl = "/a"\npoll_seconds = 0\n',
            "remote[0].poll_seconds",
            "greater than 0",
        ),
        (
            '[[remote]]\nname = "h"\nurl = "ssh://h/p"\naccept_new_host_key = "yes"\n',
            "remote[0].accept_new_host_key",
            "expected true or false",
        ),
        ("replica = 7\n", "replica", "expected a string, got integer 7"),
        ('replica = "a b"\n', "replica", "invalid name 'a b'"),
        # Issue 13, item 17: every number has an upper bound; inf and 1e12 crashed the daemon.
        (
            '[[remote]]\nname = "a"\nurl = "/a"\npoll_seconds = inf\n',
            "remote[0].poll_seconds",
            "finite number",
        ),
        (
            '[[remote]]\nname = "a"\nurl = "/a"\npoll_seconds = 1e12\n',
            "remote[0].poll_seconds",
            "less than or equal to 86400",
        ),
        ("[daemon]\nreconcile_seconds = inf\n", "daemon.reconcile_seconds", "finite number"),
        ("[daemon]\nreconcile_seconds = nan\n", "daemon.reconcile_seconds", "finite number"),
        ("[daemon]\ndebounce_ms = 100000000\n", "daemon.debounce_ms", "less than or equal"),
        ("[compaction]\nquiet_seconds = inf\n", "compaction.quiet_seconds", "finite number"),
        (
            "[compaction]\nmax_postpone_seconds = -1\n",
            "compaction.max_postpone_seconds",
            "greater than or equal to 0",
        ),
        (
            "[compaction]\nmax_postpone_seconds = 1e9\n",
            "compaction.max_postpone_seconds",
            "less than or equal to 604800",
        ),
        (
            "[compaction]\nmax_postpone_seconds = inf\n",
            "compaction.max_postpone_seconds",
            "finite number",
        ),
        (
            "[compaction]\ntombstone_horizon_days = 100000000\n",
            "compaction.tombstone_horizon_days",
            "less than or equal to 36500",
        ),
        ('replica = ".."\n', "replica", "invalid name"),
        ('replica = ".hidden"\n', "replica", "must not start with '.'"),
        ('replica = "' + "x" * 65 + '"\n', "replica", "invalid name"),
        ('state_dir = "relative"\n', "state_dir", "not an absolute path"),
        ("state_dir = 5\n", "state_dir", "expected a path string, got integer 5"),
        ('[remote]\nname = "a"\nurl = "/a"\n', "remote", "write [[remote]]"),
        ('compaction = "daily"\n', "compaction", "expected a table, got string 'daily'"),
    ],
)
def test_wrong_types_and_values_refused(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    # Top-level keys must come before the first table; tables after MINIMAL's.
    error = config_error(tmp_path, MINIMAL + text if text.startswith("[") else text + MINIMAL)
    assert error.key == key
    assert fragment in error.message


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ('[[memory]]\nname = "bad/name"\npath = "/m"\n', "memory[0].name", "invalid name"),
        ('[[memory]]\nname = ""\npath = "/m"\n', "memory[0].name", "invalid name"),
        ('[[memory]]\nname = "m"\n', "memory[0].path", "required key 'path' is missing"),
        ('[[memory]]\npath = "/m"\n', "memory[0].name", "required key 'name' is missing"),
        ("memory = []\n", "memory", "must not be empty"),
        (
            '[[memory]]\nname = "m"\npath = "/m"\nremotes = "nas"\n',
            "memory[0].remotes",
            "expected an array",
        ),
        ('[[remote]]\nname = "a"\n', "remote[0].url", "required key 'url' is missing"),
    ],
)
def test_memory_and_remote_shape_refused(
    tmp_path: Path, text: str, key: str, fragment: str
) -> None:
    error = config_error(tmp_path, text)
    assert error.key == key
    assert fragment in error.message


@pytest.mark.parametrize(
    ("schedule", "fragment"),
    [
        ("17 3 * *", "Wrong number of fields"),
        ("@daily", "5 fields"),
        ("61 * * * *", "invalid cron expression '61 * * * *'"),
        ("0 25 * * *", "invalid cron"),
        ("0 0 * * 1-5", "weekdays by name"),
        ("0 0 * * 0", "weekdays by name"),
        ("0 0 0 * * 1", "weekdays by name"),
        ("61 * * * * *", "invalid cron"),
        ("0 0 0 * * * *", "Wrong number of fields"),
        ("", "invalid cron"),
    ],
)
def test_bad_cron_refused(tmp_path: Path, schedule: str, fragment: str) -> None:
    error = config_error(tmp_path, f'[compaction]\nschedule = "{schedule}"\n')
    assert error.key == "compaction.schedule"
    assert fragment in error.message


@pytest.mark.parametrize(
    "schedule",
    ["*/15 * * * *", "0 4 * * mon-fri", "30 2 1 * *", "0 0 * * sun", "*/5 * * * * *"],
)
def test_good_cron_accepted(schedule: str) -> None:
    assert CompactionConfig(schedule=schedule).schedule == schedule


# --- cross-field rules ----------------------------------------------------------------


def test_duplicate_memory_names_refused(tmp_path: Path) -> None:
    error = config_error(
        tmp_path, MINIMAL + '[[memory]]\nname = "me"\npath = "/data/other.jsonl"\n'
    )
    assert error.key == "memory[1].name"
    assert "'me' is already used by memory[0]" in error.message


def test_duplicate_memory_paths_refused(tmp_path: Path) -> None:
    error = config_error(tmp_path, MINIMAL + '[[memory]]\nname = "you"\npath = "/data/me.jsonl"\n')
    assert error.key == "memory[1].path"
    assert "already used by memory[0]" in error.message


def test_duplicate_remote_names_refused(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        MINIMAL + '[[remote]]\nname = "r"\nurl = "/a"\n[[remote]]\nname = "r"\nurl = "/b"\n',
    )
    assert error.key == "remote[1].name"
    assert "'r' is already used by remote[0]" in error.message


def test_memory_naming_unknown_remote_refused(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        '[[memory]]\nname = "m"\npath = "/m"\nremotes = ["nas", "vmm"]\n'
        '[[remote]]\nname = "nas"\nurl = "/a"\n[[remote]]\nname = "vm"\nurl = "ssh://vm/h"\n',
    )
    assert error.key == "memory[0].remotes[1]"
    assert error.message == "no [[remote]] is named 'vmm' (did you mean 'vm'?)"


def test_memory_naming_remote_twice_refused(tmp_path: Path) -> None:
    error = config_error(
        tmp_path,
        '[[memory]]\nname = "m"\npath = "/m"\nremotes = ["nas", "nas"]\n'
        '[[remote]]\nname = "nas"\nurl = "/a"\n',
    )
    assert error.key == "memory[0].remotes[1]"
    assert "listed twice" in error.message


def test_memory_with_empty_remotes_stays_local(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            '[[memory]]\nname = "m"\npath = "/m"\nremotes = []\n'
            '[[remote]]\nname = "nas"\nurl = "/a"\n',
        )
    )
    assert config.memory_remotes("m") == []
    with pytest.raises(KeyError):
        config.memory_remotes("nope")


@pytest.mark.parametrize(
    "line",
    [
        'identity_file = "~/.ssh/k"',
        'known_hosts = "/kh"',
        "accept_new_host_key = false",
    ],
)
def test_ssh_only_key_on_folder_remote_refused(tmp_path: Path, line: str) -> None:
    key = line.split(" ")[0]
    error = config_error(
        tmp_path, MINIMAL + f'[[remote]]\nname = "nas"\nurl = "file:///mnt/nas"\n{line}\n'
    )
    assert error.key == f"remote[0].{key}"
    assert "ssh:// remotes only" in error.message


def test_timeout_seconds_on_a_folder_remote_refused(tmp_path: Path) -> None:
    error = config_error(
        tmp_path, MINIMAL + '[[remote]]\nname = "nas"\nurl = "/mnt/nas"\ntimeout_seconds = 5\n'
    )
    assert error.key == "remote[0].timeout_seconds"
    assert "ssh:// and s3:// remotes only" in error.message


@pytest.mark.parametrize(
    ("line", "io", "connect"), [("", 30.0, 10.0), ("timeout_seconds = 4", 4.0, 4.0)]
)
def test_timeout_seconds_bounds_each_answer_and_the_ssh_set_up(
    tmp_path: Path, line: str, io: float, connect: float
) -> None:
    """issue 13, item 15: how long a hung SSH hub holds up its pass."""
    from memsync.config.wiring import open_remote
    from memsync.hub.transports.ssh import SSHTransport

    path = write(tmp_path, MINIMAL + f'[[remote]]\nname = "vm"\nurl = "ssh://vm/p"\n{line}\n')
    transport = open_remote(load_config(path).remote[0])
    assert isinstance(transport, SSHTransport)
    assert (transport.io_timeout, transport.connect_timeout) == (io, connect)


@pytest.mark.parametrize(
    ("line", "read", "connect"),
    [("", 30.0, 10.0), ("timeout_seconds = 4", 4.0, 4.0), ("timeout_seconds = 60", 60.0, 10.0)],
)
def test_timeout_seconds_bounds_each_s3_request(
    tmp_path: Path, line: str, read: float, connect: float
) -> None:
    """Issue 24, item 11: S3 calls were bounded by a fixed 20 s, tried three times."""
    from memsync.config.wiring import open_remote
    from memsync.hub.transports.s3 import S3Transport

    path = write(tmp_path, MINIMAL + f'[[remote]]\nname = "t"\nurl = "s3://bucket/p"\n{line}\n')
    config = load_config(path)
    assert "timeout_seconds" in config.to_display_dict()["remote"][0]
    transport = open_remote(config.remote[0])
    assert isinstance(transport, S3Transport)
    assert transport.timeout == read
    client_config = transport.client.meta.config
    assert (client_config.read_timeout, client_config.connect_timeout) == (read, connect)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "3601"])
def test_timeout_seconds_must_be_a_sane_number(tmp_path: Path, value: str) -> None:
    text = MINIMAL + f'[[remote]]\nname = "vm"\nurl = "ssh://vm/p"\ntimeout_seconds = {value}\n'
    assert config_error(tmp_path, text).key == "remote[0].timeout_seconds"


# --- the file itself ------------------------------------------------------------------


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    error = config_error(tmp_path, "[daemon\ndebounce_ms = 1\n")
    assert error.key == ""
    assert error.message.startswith("TOML syntax error: ")
    assert "line 1" in error.message
    assert str(error).startswith(f"{tmp_path / 'config.toml'}: TOML syntax error")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="no such file") as info:
        load_config(path)
    assert info.value.file == str(path)
    assert info.value.key == ""


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'replica = "\xff"\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    path.chmod(0)
    with pytest.raises(ConfigError, match="cannot read it"):
        load_config(path)


# --- risky layouts (issue 13, item 18) ------------------------------------------------


@pytest.mark.parametrize(
    ("url", "where"),
    [("{d}/me.jsonl", "is"), ("{d}", "holds"), ("{d}/../{n}", "holds"), ("file://{d}", "holds")],
)
def test_a_folder_hub_that_is_or_holds_a_memory_file_is_refused(
    tmp_path: Path, url: str, where: str
) -> None:
    d = tmp_path / "mem"
    text = (
        f'[[memory]]\nname = "me"\npath = "{d}/me.jsonl"\n'
        f'[[remote]]\nname = "hub"\nurl = "{url.format(d=d, n=d.name)}"\n'
    )
    error = config_error(tmp_path, text)
    assert error.key == "remote[0].url"
    assert f"{where} the memory file" in error.message
    assert "folder of its own" in error.message


def test_a_hub_beside_the_memory_file_is_fine(tmp_path: Path) -> None:
    text = (
        f'[[memory]]\nname = "me"\npath = "{tmp_path}/mem/me.jsonl"\n'
        f'[[remote]]\nname = "hub"\nurl = "{tmp_path}/hub"\n'
    )
    load_config(write(tmp_path, text))


def test_two_memories_at_one_path_spelled_two_ways_are_refused(tmp_path: Path) -> None:
    text = (
        f'[[memory]]\nname = "a"\npath = "{tmp_path}/x/me.jsonl"\n'
        f'[[memory]]\nname = "b"\npath = "{tmp_path}/x/../x/me.jsonl"\n'
    )
    error = config_error(tmp_path, text)
    assert error.key == "memory[1].path"
    assert "already used by memory[0]" in error.message
