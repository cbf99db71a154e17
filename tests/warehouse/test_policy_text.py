"""Every exported policy text tells one story about who checks the rules: none says that each rule is checked
before the operation runs while also saying the tools do not check some, and none lists a policy-only check
among the checks the tools make."""

from __future__ import annotations

import pytest

from domains.policy import AGENT_RULES_HEADING, policy_contradictions
from domains.registry import DOMAIN_NAMES, get_spec
from warehouse.exports import policy_markdown

DOMAINS = sorted(set(DOMAIN_NAMES) | {"airline", "retail"})


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_exported_policy_never_contradicts_itself_on_who_checks(domain: str) -> None:
    spec = get_spec(domain)
    text = policy_markdown(spec)  # what export_tau2 writes as policy.md (and the tau2 package copies)
    assert policy_contradictions(text, spec) == []
    assert "checked before the operation runs" not in text
    if any(r.checked_by == "agent" for r in spec.all_rules):
        assert AGENT_RULES_HEADING in text and "the tools will not stop you" in text


def test_the_scan_catches_the_old_contradiction() -> None:
    """The sentence pair the issue found in policy.md, and a policy-only check slipped among the tools' checks."""
    spec = get_spec("railway")
    old = ("Each rule below is checked before the operation runs.\n"
           "The tools do not check the following rules; the agent must.")
    assert policy_contradictions(old)
    (refund,) = [t for t in spec.tools if t.name == "refund_ticket"]
    policy_only = next(p for p in refund.preconditions if p.enforced_by == "policy")
    slipped = policy_markdown(spec).replace("### refund_ticket\n", f"### refund_ticket\n\n- {policy_only.error}\n", 1)
    assert any("policy-only check" in p for p in policy_contradictions(slipped, spec))
