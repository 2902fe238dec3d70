"""The console commands' command-line forms (``core.command_line``): each action's fields are its
page form's, plus the names its page takes from the URL; each goes through the parse function the
page's view calls. Importing this module registers them (``console.commands.registry``)."""

from __future__ import annotations

from console.commands import acl, brokers, dlq, groups, messages, session, tail, topics
from console.forms import (
    AclAccountForm,
    AclDeleteForm,
    BrokerConfigForm,
    GlobalWhiteListForm,
    GroupForm,
    NamesrvSwitchForm,
    ResendForm,
    ResetOffsetForm,
    SendMessageForm,
    TopicForm,
)
from core.command_line import by_id, form_fields, register

DEAD_LETTER_FILTER = ("key", "tag", "begin", "end")


register("topic.save", topics.SaveTopic.parse, form_fields(TopicForm), defaults=TopicForm)
register("topic.delete", lambda f: topics.DeleteTopic.parse(f.get("topic", "")), ("topic",))
register(
    "topic.send",
    lambda f: topics.SendTestMessage.parse(f.get("topic", ""), f),
    ("topic", *form_fields(SendMessageForm)),
)
register("group.save", groups.SaveGroup.parse, form_fields(GroupForm), defaults=GroupForm)
register("group.delete", lambda f: groups.DeleteGroup(f.get("group", "")), ("group",))
register(
    "group.reset_offset",
    lambda f: groups.ResetOffset.parse(f.get("group", ""), f),
    ("group", *form_fields(ResetOffsetForm)),
)
register("group.skip_backlog", lambda f: groups.SkipBacklog.parse(f.get("group", "")), ("group",))
register(
    "broker.config.update",
    lambda f: brokers.UpdateBrokerConfig.parse(f.get("addr", ""), f),
    ("addr", *form_fields(BrokerConfigForm)),
)
register(
    brokers.PURGE_DAMAGED,
    lambda f: brokers.PurgeDamaged.parse(f.get("addr", ""), f),
    ("addr", "from", "confirm"),
)
register(
    brokers.SWITCHOVER,
    lambda f: brokers.Switchover.parse(f.get("broker_name", ""), f),
    ("broker_name", "broker_id", "master_epoch", "confirm"),
)
register(acl.SAVE, acl.SaveAccount.parse, form_fields(AclAccountForm))
register(acl.DELETE, acl.DeleteAccount.parse, form_fields(AclDeleteForm))
register(acl.WHITE_LIST, acl.UpdateWhiteList.parse, form_fields(GlobalWhiteListForm))
register(
    "message.resend",
    lambda f: messages.Resend.parse(f.get("msg_id", ""), f),
    ("msg_id", *form_fields(ResendForm)),
)
register(messages.END_TRANSACTION, messages.EndTransaction.parse, ("offset_msg_id", "action"))
register("dlq.make_readable", lambda f: dlq.MakeReadable.parse(f.get("group", "")), ("group",))
register(
    "dlq.replay",
    lambda f: dlq.Replay.parse(f.get("group", ""), f),
    ("group", "target", "scope", "ids", "rate", *DEAD_LETTER_FILTER),
    repeatable=("ids",),
)
register("tail.filter.save", tail.SaveTailFilter.parse, ("name", "topic", *tail.FILTER_FIELDS))
register("tail.filter.delete", by_id("filter_id", lambda pk, _: tail.DeleteTailFilter(pk)), ("filter_id",))
register(session.SWITCH, session.SwitchNamesrv.parse, form_fields(NamesrvSwitchForm))
