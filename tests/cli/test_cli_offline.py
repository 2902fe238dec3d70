"""mqadmin behaviour that needs no running server: help, usage errors, parsing, rendering."""

from __future__ import annotations

import datetime
import socket
import subprocess
import sys
import time

import pytest

from broker.cli import main
from broker.cli_commands import all_commands
from broker.cli_commands.output import format_millis, render_table
from broker.cli_commands.versions import version_desc
from broker.client.admin import parse_timestamp

REQUIRED_COMMANDS = {
    "clusterList",
    "topicList",
    "updateTopic",
    "deleteTopic",
    "topicRoute",
    "topicStatus",
    "updateSubGroup",
    "deleteSubGroup",
    "consumerProgress",
    "consumerConnection",
    "producerConnection",
    "queryMsgById",
    "queryMsgByKey",
    "resetOffsetByTime",
    "sendMessage",
    "consumeMessage",
    "brokerStatus",
    "getBrokerConfig",
    "updateBrokerConfig",
}


def test_help_lists_every_subcommand_with_a_summary(capsys):
    assert main(["help"]) == 0
    out = capsys.readouterr().out
    for name in REQUIRED_COMMANDS:
        line = next(line for line in out.splitlines() if line.split()[:1] == [name])
        assert len(line.split()) > 2, f"{name} has no summary"
    assert {c.name for c in all_commands()} >= REQUIRED_COMMANDS


def test_help_of_one_subcommand_shows_its_flags(capsys):
    assert main(["help", "updateTopic"]) == 0
    out = capsys.readouterr().out
    for flag in ("-t", "-c", "-b", "-r", "-w", "-p", "-o", "-n", "--json"):
        assert flag in out


def test_subcommand_dash_h_exits_zero(capsys):
    assert main(["topicStatus", "-h"]) == 0
    assert "--topic" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["noSuchCommand"],
        ["updateTopic", "-b", "127.0.0.1:1"],  # -t missing
        ["updateTopic", "-t", "T", "-n", "127.0.0.1:9"],  # neither -b nor -c
        ["updateTopic", "-t", "T", "-b", "a:1", "-c", "C"],  # both -b and -c
        ["updateTopic", "-t", "T", "-b", "a:1", "-p", "5"],  # bad perm
        ["updateTopic", "-t", "T", "-b", "a:1", "-r", "many"],
        ["updateSubGroup", "-g", "G", "-b", "a:1", "-s", "maybe"],
        ["resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday"],
        ["consumeMessage", "-t", "T", "-i", "1"],  # queue id without broker
        ["topicList", "--bogus"],
        ["help", "nothing"],
    ],
)
def test_bad_command_lines_exit_2_with_a_message(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("mqadmin")
    assert "error:" in err


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_name_server_exits_1_naming_the_address(capsys):
    addr = f"127.0.0.1:{_dead_port()}"
    assert main(["topicList", "-n", addr]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mqadmin: cannot reach name server {addr} (")
    assert "refused" in err


def test_unreachable_broker_exits_1_naming_the_address(capsys):
    addr = f"127.0.0.1:{_dead_port()}"
    assert main(["brokerStatus", "-b", addr, "--timeout", "2"]) == 1
    assert f"cannot reach broker {addr}" in capsys.readouterr().err


def test_missing_name_server_address_is_explained(capsys, monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert main(["clusterList"]) == 1
    assert "NAMESRV_ADDR" in capsys.readouterr().err


def test_name_server_address_comes_from_the_environment(capsys, monkeypatch):
    addr = f"127.0.0.1:{_dead_port()}"
    monkeypatch.setenv("NAMESRV_ADDR", addr)
    assert main(["clusterList"]) == 1
    assert addr in capsys.readouterr().err


def test_module_entry_point_runs_as_a_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "broker.cli", "help"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0
    assert "resetOffsetByTime" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "broker.cli", "topicRoute"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert "--topic" in proc.stderr or "-t" in proc.stderr


def test_parse_timestamp_forms():
    assert parse_timestamp("1700000000123") == 1700000000123
    now = parse_timestamp("now")
    assert abs(now - time.time() * 1000) < 5000
    expected = int(datetime.datetime(2024, 3, 5, 6, 7, 8, 9000).timestamp() * 1000)
    assert parse_timestamp("2024-03-05#06:07:08:009") == expected
    with pytest.raises(ValueError, match="yyyy-MM-dd"):
        parse_timestamp("2024-03-05 06:07")


def test_render_table_aligns_columns():
    text = render_table(("#Topic", "#QID"), [("a-long-topic-name", 0), ("t", 12)])
    lines = text.splitlines()
    assert lines[0].index("#QID") == lines[1].index("0") == lines[2].index("12")


def test_format_millis_and_versions():
    assert format_millis(0) == "N/A"
    assert format_millis(1_700_000_000_123).endswith(",123")
    assert version_desc(401) == "V4_9_4"
    assert version_desc(413) == "V5_0_0"
    assert version_desc(412) == "V5_0_0_SNAPSHOT"


def test_booleans_print_as_java_does():
    from broker.cli_commands.output import render_assignments

    assert render_assignments({"order": False, "perm": 6, "consumeEnable": True}) == (
        "order=false perm=6 consumeEnable=true"
    )
