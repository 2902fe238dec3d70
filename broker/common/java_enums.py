"""The Java enums of RocketMQ's JSON bodies, and reading them as fastjson does.

fastjson reads an enum field from the member's name (also matched ignoring case) or from its
ordinal, the member's place in the Java declaration. Apache's C++ client, and every binding of
it, sends ordinals (``"consumeType":1,"messageModel":1,"consumeFromWhere":0``), Java peers send
names: every body decoded here reads its enum fields through ``JavaEnum.read``, and the broker
keeps and shows the names. Members are listed in Apache RocketMQ's declaration order, deprecated
ones included: they hold their places. ``expressionType`` (SubscriptionData) is a String in Java,
not an enum; a header's ``language`` is read with the frame (broker.remoting.frame).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


class EnumValueError(ValueError):
    """A value fastjson would not read as the enum (an ordinal out of range, a number that is
    not whole, a boolean, an object): RocketMQ's broker answers SYSTEM_ERROR saying so."""


@dataclass(frozen=True)
class JavaEnum:
    name: str
    members: tuple[str, ...]
    _by_folded_name: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_folded_name", {m.lower(): m for m in self.members})

    def read(self, value: object, what: str) -> str | None:
        """The member ``value`` names, as fastjson reads an enum field: the name, or its ordinal.
        None (Java's null) for null, "" or a name the enum does not declare; EnumValueError, naming
        ``what`` (the field), for anything else fastjson refuses."""
        if value is None:
            return None
        if isinstance(value, str):
            if value in self.members:
                return value
            return self._by_folded_name.get(value.lower())
        if isinstance(value, int) and not isinstance(value, bool):
            if 0 <= value < len(self.members):
                return self.members[value]
            raise EnumValueError(
                f"{what} {value} is not a {self.name} ordinal (0-{len(self.members) - 1}: "
                f"{', '.join(self.members)})"
            )
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise EnumValueError(f"{what} {shown} is not a {self.name} (a name or an ordinal)")

    def name_problem(self, value: str, what: str) -> str | None:
        """Why ``value`` is no member's name, as Java's ``Enum.valueOf`` reads a header's text
        (exactly, no ordinals); None when it is one."""
        if value in self.members:
            return None
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"{what} {shown!r} is not a {self.name} ({', '.join(self.members)})"


CONSUME_TYPE = JavaEnum("ConsumeType", ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"))
MESSAGE_MODEL = JavaEnum("MessageModel", ("BROADCASTING", "CLUSTERING", "LITE_SELECTIVE"))
CONSUME_FROM_WHERE = JavaEnum(
    "ConsumeFromWhere",
    (
        "CONSUME_FROM_LAST_OFFSET",
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",  # deprecated
        "CONSUME_FROM_MIN_OFFSET",  # deprecated
        "CONSUME_FROM_MAX_OFFSET",  # deprecated
        "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_FROM_TIMESTAMP",
    ),
)
TOPIC_FILTER_TYPE = JavaEnum("TopicFilterType", ("SINGLE_TAG", "MULTI_TAG"))

# The enum fields of each body the broker and the name server decode.
CONSUMER_DATA: Mapping[str, JavaEnum] = {
    "consumeType": CONSUME_TYPE,
    "messageModel": MESSAGE_MODEL,
    "consumeFromWhere": CONSUME_FROM_WHERE,
}
TOPIC_CONFIG: Mapping[str, JavaEnum] = {"topicFilterType": TOPIC_FILTER_TYPE}


def read_enum_fields(body: dict, fields: Mapping[str, JavaEnum]) -> None:
    """``body``'s enum fields (one of the tables above) replaced, where present, by the members
    they name; a field fastjson reads as null is dropped, as a null field is left out of a body.
    EnumValueError for a value fastjson refuses."""
    for name, enum in fields.items():
        if name in body:
            member = enum.read(body[name], name)
            if member is None:
                del body[name]
            else:
                body[name] = member
