"""Switching the cluster a console user looks at: only the name servers settings list may be
chosen, so the console never connects to an address typed into a form. The choice itself lives in
the user's session (the view keeps it); the command checks and records it."""

from __future__ import annotations

from dataclasses import dataclass

from console.commands.parsing import form_refusal
from console.forms import NamesrvSwitchForm
from core.boundary import Actor, Cluster, Invalid, Outcome, Params, command
from core.cluster_access import namesrv_choices, select_namesrv

SWITCH = "namesrv.switch"


@dataclass(frozen=True)
class SwitchNamesrv(Params):
    namesrv: str
    next_url: str = ""

    @classmethod
    def parse(cls, data) -> SwitchNamesrv | Invalid:
        form = NamesrvSwitchForm(data)
        if not form.is_valid():
            return form_refusal(form, "")
        return cls(form.cleaned_data["namesrv"], form.cleaned_data.get("next") or "")

    @property
    def target(self) -> str:
        return self.namesrv


@command(SWITCH)
def switch_namesrv(actor: Actor, cluster: Cluster, params: SwitchNamesrv) -> Outcome:
    if params.namesrv not in namesrv_choices():
        raise ValueError(f"{params.namesrv!r} is not one of the configured name servers (BROKER_NAMESRV)")
    return Outcome(params.namesrv, "", {}, params)


def remember(request, namesrv: str) -> None:
    """Keep the switched-to name server in the user's session (after ``switch_namesrv`` allowed it)."""
    select_namesrv(request, namesrv)
