"""Hypothesis fuzzing of every form of the console and the analytics app: any input, as a browser or
a script could post it, is either valid or answered with form errors — never an exception.

The forms are found by introspection (every ``forms.Form`` of ``console.forms`` and
``analytics.forms``), so a new form is fuzzed without a line here. Values mix arbitrary text
(control characters, NUL, unicode), numbers of any size, date-like and crontab-like strings and
each field's own choices; fields go missing or come twice. Fixed budget: 100 examples a form
(``CONSOLE_FUZZ_EXAMPLES`` raises it), derandomized so a run repeats the last one.
"""

from __future__ import annotations

import inspect
import os

import pytest
from django import forms
from django.http import QueryDict
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analytics.forms
import console.forms

pytestmark = pytest.mark.django_db
EXAMPLES = int(os.environ.get("CONSOLE_FUZZ_EXAMPLES", "100"))

FORMS = sorted(
    {
        cls
        for module in (console.forms, analytics.forms)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, forms.Form) and cls.__module__ == module.__name__
    },
    key=lambda cls: f"{cls.__module__}.{cls.__name__}",
)

TRICKY = [
    "",
    " ",
    "0",
    "-1",
    "1e309",
    "NaN",
    "9" * 5000,  # past Python's int-from-string digit limit
    "2026-11-23T08:00",
    "2026-02-30T25:61",
    "99999-01-01T00:00",
    "0001-01-01T00:00",
    "*/0 * * * *",
    "60 24 32 13 8",
    "* * * * * *",
    "../../etc/passwd",
    "a/b",
    "%RETRY%g",
    "<script>alert(1)</script>",
    "\x00",
    "TBW102",
    "127.0.0.1:9876",
    "a" * 300,
    "true",
    "on",
    "DENY",
    "PUB|SUB",
    "topicA=PUB\ntopicB=SUB|PUB",
]


def _value_for(field: forms.Field) -> st.SearchStrategy[str]:
    choices = [
        str(value) for value, _ in getattr(field, "choices", []) or [] if not isinstance(_, list | tuple)
    ]
    options = [
        st.text(max_size=120),
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
        st.sampled_from(TRICKY),
        st.from_regex(r"[-*/0-9, ]{0,30}", fullmatch=True),
    ]
    if choices:
        options.append(st.sampled_from(choices))
    return st.one_of(options)


@st.composite
def _form_data(draw, form_class) -> QueryDict:
    data = QueryDict(mutable=True)
    for name, field in form_class.base_fields.items():
        count = draw(st.sampled_from([0, 1, 1, 1, 2]))  # missing, given, given twice
        data.setlist(name, [draw(_value_for(field)) for _ in range(count)])
    if draw(st.booleans()):  # a field the form does not know
        data["unexpected"] = draw(st.text(max_size=20))
    return data


@pytest.mark.parametrize("form_class", FORMS, ids=lambda cls: cls.__name__)
def test_any_input_is_valid_or_refused_with_form_errors(form_class):
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        derandomize=True,
    )
    @given(_form_data(form_class))
    def check(data):
        form = form_class(data)
        if form.is_valid():
            assert isinstance(form.cleaned_data, dict)
        else:
            assert form.errors
            assert form.errors.as_text()  # what the views audit and show

    check()


def test_the_fuzzed_forms_include_both_apps():
    names = {cls.__name__ for cls in FORMS}
    assert {"TopicForm", "GroupForm", "ResetOffsetForm", "RunForm", "ScheduleForm"} <= names


# -- parameters the views read without a form -------------------------------------------------------
@pytest.fixture
def viewer(db):
    from tests.cluster import create_user
    from tests.console.conftest import PASSWORD

    client = Client()
    client.force_login(create_user("fuzz-viewer", "viewer", PASSWORD))
    return client


def test_the_audit_filters_take_any_text(viewer):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(
        st.dictionaries(
            st.sampled_from(["user", "action", "result", "page"]),
            st.one_of(st.text(max_size=60), st.sampled_from(TRICKY)),
        )
    )
    def check(params):
        response = viewer.get("/audit/", params)
        holds_nul = any("\x00" in value for value in params.values())
        assert response.status_code == (400 if holds_nul else 200), params

    check()


def test_a_nul_character_in_any_parameter_is_refused_before_a_view_runs(db):
    from console.models import SavedTailFilter
    from core.models import AuditRecord
    from tests.cluster import create_user
    from tests.console.conftest import PASSWORD

    operator = Client()
    operator.force_login(create_user("nul-operator", "operator", PASSWORD))
    refused = operator.post("/ops/tail/filters/", {"name": "mine\x00", "topic": "T", "tags": "a"})
    assert refused.status_code == 400 and b"holds a NUL character" in refused.content
    assert not SavedTailFilter.objects.exists() and not AuditRecord.objects.exists()
    assert operator.get("/audit/", {"user": "a\x00b"}).status_code == 400
    assert operator.get("/audit/", {"user\x00": "a"}).status_code == 400
