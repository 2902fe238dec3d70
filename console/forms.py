"""Forms of the console's actions: each field checked here, so a bad value is a 400 naming the field
and never reaches the cluster."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from broker.client.admin import acl
from broker.common import acl_rules
from broker.common.topic_config import PERM_READ, PERM_WRITE, validate_topic

_CONFIG_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*$")
# RocketMQ's group names follow the topic charset rule (Validators.checkGroup).
_GROUP_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_QUEUE_NUMS = 1024
MAX_TEST_BODY_BYTES = 4 * 1024 * 1024

PERM_CHOICES = [
    (str(PERM_READ | PERM_WRITE), "read + write (6)"),
    (str(PERM_READ), "read only (4)"),
    (str(PERM_WRITE), "write only (2)"),
]


def check_topic(value: str) -> str:
    value = value.strip()
    problem = validate_topic(value)
    if problem:
        raise forms.ValidationError(problem)
    return value


def check_group(value: str) -> str:
    value = value.strip()
    if not value or len(value) > 255 or not _GROUP_NAME.match(value):
        raise forms.ValidationError("a group name is 1-255 characters of letters, digits, %, |, _ and -")
    return value


class NamesrvSwitchForm(forms.Form):
    namesrv = forms.CharField(max_length=1024)
    next = forms.CharField(required=False, max_length=2048)


class BrokerConfigForm(forms.Form):
    key = forms.CharField(max_length=128, help_text="a broker.conf key, e.g. autoCreateTopicEnable")
    value = forms.CharField(max_length=1024, required=False)

    def clean_key(self):
        key = self.cleaned_data["key"].strip()
        if not _CONFIG_KEY.match(key):
            raise forms.ValidationError("a config key is letters, digits, _ and . starting with a letter")
        return key

    def clean_value(self):
        value = self.cleaned_data["value"]
        if "\n" in value or "\r" in value:
            raise forms.ValidationError("a config value is one line")
        return value.strip()


class TopicForm(forms.Form):
    topic = forms.CharField(max_length=127)
    cluster = forms.CharField(max_length=255, required=False, help_text="every master of this cluster")
    broker_addr = forms.CharField(max_length=255, required=False, help_text="or only this broker")
    read_queue_nums = forms.IntegerField(min_value=1, max_value=MAX_QUEUE_NUMS, initial=8)
    write_queue_nums = forms.IntegerField(min_value=1, max_value=MAX_QUEUE_NUMS, initial=8)
    perm = forms.TypedChoiceField(choices=PERM_CHOICES, coerce=int, initial=str(PERM_READ | PERM_WRITE))
    order = forms.BooleanField(required=False, help_text="FIFO (ordered) topic")

    def clean_topic(self):
        return check_topic(self.cleaned_data["topic"])

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        if not data.get("cluster") and not data.get("broker_addr"):
            raise forms.ValidationError("choose a cluster or a broker")
        return data


class SendMessageForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea, strip=False)
    tags = forms.CharField(max_length=255, required=False)
    keys = forms.CharField(max_length=1024, required=False, help_text="space separated")
    broker_name = forms.CharField(max_length=255, required=False)
    queue_id = forms.IntegerField(min_value=0, required=False)

    def clean_body(self):
        body = self.cleaned_data["body"]
        if not body:
            raise forms.ValidationError("a message needs a body")
        if len(body.encode("utf-8")) > MAX_TEST_BODY_BYTES:
            raise forms.ValidationError("a test message body is at most 4 MiB")
        return body

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        if data.get("queue_id") is not None and not data.get("broker_name"):
            raise forms.ValidationError("a queue id needs a broker name")
        return data


class GroupForm(forms.Form):
    group = forms.CharField(max_length=255)
    cluster = forms.CharField(max_length=255, required=False)
    broker_addr = forms.CharField(max_length=255, required=False)
    retry_max_times = forms.IntegerField(
        min_value=-1, max_value=64, initial=16, help_text="-1: no retry, straight to the DLQ"
    )
    retry_queue_nums = forms.IntegerField(min_value=1, max_value=64, initial=1)
    consume_enable = forms.BooleanField(required=False, initial=True)
    consume_broadcast_enable = forms.BooleanField(required=False, initial=True)
    consume_from_min_enable = forms.BooleanField(required=False, initial=True)
    consume_message_orderly = forms.BooleanField(required=False)

    def clean_group(self):
        return check_group(self.cleaned_data["group"])

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        if not data.get("cluster") and not data.get("broker_addr"):
            raise forms.ValidationError("choose a cluster or a broker")
        return data


RESET_EARLIEST, RESET_LATEST, RESET_TIMESTAMP = "earliest", "latest", "timestamp"


class ResetOffsetForm(forms.Form):
    topic = forms.CharField(max_length=127)
    mode = forms.ChoiceField(
        choices=[(RESET_EARLIEST, "earliest"), (RESET_LATEST, "latest"), (RESET_TIMESTAMP, "a point in time")]
    )
    timestamp = forms.DateTimeField(
        required=False, input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]
    )

    def clean_topic(self):
        return check_topic(self.cleaned_data["topic"])

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        if data.get("mode") == RESET_TIMESTAMP:
            if not data.get("timestamp"):
                raise forms.ValidationError("resetting to a point in time needs the time")
            # resetOffsetByTime reads a negative time as "latest": a time before 1970 would skip
            # the backlog it was meant to replay.
            if data["timestamp"].timestamp() < 0:
                raise forms.ValidationError(
                    "the time must be 1970-01-01T00:00 UTC or later (store times start there)"
                )
        return data

    def target_millis(self) -> int:
        """RocketMQ's resetOffsetByTime timestamp: 0 = earliest, -1 = latest, else epoch ms."""
        mode = self.cleaned_data["mode"]
        if mode == RESET_EARLIEST:
            return 0
        if mode == RESET_LATEST:
            return -1
        return int(self.cleaned_data["timestamp"].timestamp() * 1000)


class ResendForm(forms.Form):
    group = forms.CharField(max_length=255)
    client_id = forms.CharField(max_length=255)

    def clean_group(self):
        return check_group(self.cleaned_data["group"])


class TopicTimeQueryForm(forms.Form):
    topic = forms.CharField(max_length=127)
    begin = forms.DateTimeField(required=False, input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])
    end = forms.DateTimeField(required=False, input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"])

    def clean_topic(self):
        return check_topic(self.cleaned_data["topic"])

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        if data.get("begin") and data.get("end") and data["begin"] > data["end"]:
            raise forms.ValidationError("the beginning is after the end")
        return data


class KeyQueryForm(forms.Form):
    topic = forms.CharField(max_length=127)
    key = forms.CharField(max_length=1024)

    def clean_topic(self):
        return check_topic(self.cleaned_data["topic"])


class IdQueryForm(forms.Form):
    topic = forms.CharField(max_length=127, required=False, help_text="needed for a client msgId")
    msg_id = forms.CharField(max_length=64)

    def clean_topic(self):
        topic = self.cleaned_data["topic"].strip()
        return check_topic(topic) if topic else ""

    def clean_msg_id(self):
        value = self.cleaned_data["msg_id"].strip()
        if not re.fullmatch(r"[0-9A-Fa-f]{32,64}", value):
            raise forms.ValidationError("a message id is 32 or more hex digits")
        return value.upper()


class ProducerQueryForm(forms.Form):
    topic = forms.CharField(max_length=127)
    group = forms.CharField(max_length=255)

    def clean_topic(self):
        return check_topic(self.cleaned_data["topic"])

    def clean_group(self):
        return check_group(self.cleaned_data["group"])


# -- ACL (the plain ACL of the brokers; checks are the admin client's, so mqadmin and the console
# refuse the same values with the same words) ------------------------------------------------------
ACL_PERM_CHOICES = [(perm, perm) for perm in acl_rules.PERMISSIONS]


def _acl_checked(check, value):
    try:
        return check(value)
    except acl.AclInputError as exc:
        raise forms.ValidationError(str(exc)) from None


def _resource_lines(text: str) -> list[str]:
    """Permissions typed one per line or separated by commas."""
    return [item for line in text.splitlines() for item in acl_rules.split_entries(line)]


def _address_lines(text: str) -> list[str]:
    """White addresses typed one per line or separated by commas (a ``{a,b}`` choice kept whole)."""
    return [item for line in text.splitlines() for item in acl_rules.split_addresses(line)]


class AclTargetForm(forms.Form):
    """Where an ACL change goes: every broker of a cluster (slaves too), or one broker."""

    cluster = forms.CharField(max_length=255, required=False, help_text="every broker of this cluster")
    broker_addr = forms.CharField(max_length=255, required=False, help_text="or only this broker")

    def clean(self) -> dict[str, Any]:
        super().clean()  # its result is typed Optional: read self.cleaned_data
        data = self.cleaned_data
        if not data.get("cluster") and not data.get("broker_addr"):
            raise forms.ValidationError("choose a cluster or a broker")
        return data


class AclAccountForm(AclTargetForm):
    """Every field of an account; saving replaces each (an empty list or address clears it)
    except an empty secret key, which keeps the account's."""

    access_key = forms.CharField(max_length=acl_rules.KEY_MAX_LENGTH)
    secret_key = forms.CharField(
        max_length=acl_rules.KEY_MAX_LENGTH,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="leave empty to keep an existing account's secret key",
    )
    white_remote_address = forms.CharField(max_length=acl_rules.MAX_TEXT_LENGTH, required=False)
    admin = forms.BooleanField(required=False)
    default_topic_perm = forms.ChoiceField(choices=ACL_PERM_CHOICES, initial=acl_rules.DEFAULT_PERMISSION)
    default_group_perm = forms.ChoiceField(choices=ACL_PERM_CHOICES, initial=acl_rules.DEFAULT_PERMISSION)
    topic_perms = forms.CharField(widget=forms.Textarea, required=False, max_length=64 * 1024)
    group_perms = forms.CharField(widget=forms.Textarea, required=False, max_length=64 * 1024)

    def clean_access_key(self):
        return _acl_checked(acl.check_access_key, self.cleaned_data["access_key"])

    def clean_secret_key(self):
        secret = self.cleaned_data["secret_key"]
        return _acl_checked(acl.check_secret_key, secret) if secret.strip() else ""

    def clean_white_remote_address(self):
        value = self.cleaned_data["white_remote_address"].strip()
        return _acl_checked(acl.check_white_address, value) if value else ""

    def clean_topic_perms(self):
        return _acl_checked(
            lambda t: acl.check_resource_perms(_resource_lines(t), "topicPerms"),
            self.cleaned_data["topic_perms"],
        )

    def clean_group_perms(self):
        return _acl_checked(
            lambda t: acl.check_resource_perms(_resource_lines(t), "groupPerms"),
            self.cleaned_data["group_perms"],
        )

    def account(self) -> acl.PlainAccessConfig:
        data = self.cleaned_data
        return acl.PlainAccessConfig(
            access_key=data["access_key"],
            secret_key=data["secret_key"],
            white_remote_address=data["white_remote_address"],
            admin=data["admin"],
            default_topic_perm=data["default_topic_perm"],
            default_group_perm=data["default_group_perm"],
            topic_perms=data["topic_perms"],
            group_perms=data["group_perms"],
        )


class AclDeleteForm(AclTargetForm):
    access_key = forms.CharField(max_length=acl_rules.KEY_MAX_LENGTH)

    def clean_access_key(self):
        return _acl_checked(acl.check_access_key, self.cleaned_data["access_key"])


class GlobalWhiteListForm(AclTargetForm):
    addresses = forms.CharField(
        widget=forms.Textarea,
        required=False,
        max_length=64 * 1024,
        help_text="one pattern per line (or comma-separated); empty: no global white address",
    )

    def clean_addresses(self):
        return _acl_checked(lambda t: acl.check_addr_list(_address_lines(t)), self.cleaned_data["addresses"])
