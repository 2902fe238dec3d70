"""Issue 19 item 10: the broker of `make run` (the Procfile's own lines, in a temp var dir) reads
and writes a real broker.conf, created under the var dir on first start, so a setting changed at
run time (as the console's broker page does) survives a restart."""

from __future__ import annotations

import pytest

from broker.client.admin import MQAdmin
from broker.local_cluster import wait_until
from console.management.commands.ensure_broker_conf import MAKE_RUN_SEGMENT_BYTES
from tests.browser.make_run_stack import MakeRunStack

pytestmark = pytest.mark.timeout(180)


def test_make_run_broker_keeps_a_runtime_config_change_across_a_restart(tmp_path):
    stack = MakeRunStack(tmp_path)
    stack.start(processes=("namesrv", "broker"))
    try:
        conf = stack.var_dir / "broker.conf"
        created = conf.read_text()
        assert f"mappedFileSizeCommitLog={MAKE_RUN_SEGMENT_BYTES}\n" in created
        assert f"archiveUri={(stack.var_dir / 'archive').resolve()}\n" in created
        assert f"storePathRootDir={(stack.var_dir / 'store').resolve()}\n" in created
        with MQAdmin(stack.namesrv_addr) as admin:
            assert admin.broker_config(stack.broker_addr)["mappedFileSizeCommitLog"] == str(
                MAKE_RUN_SEGMENT_BYTES
            )
            admin.update_broker_config(stack.broker_addr, {"transactionCheckMax": "7"})

            assert stack.stop_process("broker") == 0
            stack.spawn("broker")
            stack.wait_for_log("broker", "created", 1)  # the first start's line, still in the log
            wait_until(lambda: stack.log("broker").count("listening on") == 2, 60, what="the restart")
            assert stack.log("broker").count("(existing, left as it is)") == 1
            config = admin.broker_config(stack.broker_addr)
        assert config["transactionCheckMax"] == "7"
        text = conf.read_text()
        assert "transactionCheckMax=7" in text and text.startswith(created.rstrip("\n"))  # comments kept
    finally:
        stack.stop()
