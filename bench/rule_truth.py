"""Per domain: the rules the tools check, with the verdicts of the calls generated to break them, the terms the
tools apply, the agent's rules, and the pairs of rules that decide one request differently without a precedence.

    python bench/rule_truth.py [DOMAIN ...] [--ids]

A rule's verdict is "refused k/k" when every generated violating call (``synthesis/rule_cases.py``: the intents'
writes bound to candidate rows, or example values recombined) was refused, "ACCEPTED" otherwise, and "no case"
when no reachable state breaks it (the rule says why in ``no_example``).
"""

from __future__ import annotations

import argparse

from domains.policy import section_of
from domains.registry import available_domains, get_engine, get_spec
from synthesis.rule_cases import rule_cases, rule_conflicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("domains", nargs="*")
    parser.add_argument("--ids", action="store_true", help="list each rule with its verdict")
    args = parser.parse_args()
    print(f"{'domain':<14}{'tool rules':>11}{'refused':>9}{'accepted':>9}{'no case':>8}{'cases':>7}{'terms':>7}"
          f"{'agent rules':>12}{'conflicts':>10}")
    for domain in args.domains or sorted(available_domains()):
        spec, engine = get_spec(domain), get_engine(domain, 0)
        if spec.users is None:
            continue
        cases = rule_cases(spec, engine)
        checked = spec.checked_rules
        sections = {r.id: section_of(r, checked) for r in spec.all_rules}
        refused = sum(1 for cs in cases.values() if cs and all(c.refused for c in cs))
        accepted = sum(1 for cs in cases.values() if any(not c.refused for c in cs))
        none = sum(1 for cs in cases.values() if not cs)
        agent = [r for r, s in sections.items() if s == "agent"]
        terms = [r for r, s in sections.items() if s == "term"]
        conflicts = rule_conflicts(spec, engine)
        print(f"{domain:<14}{len(cases):>11}{refused:>9}{accepted:>9}{none:>8}{sum(map(len, cases.values())):>7}"
              f"{len(terms):>7}{len(agent):>12}{len(conflicts):>10}")
        if args.ids:
            for rule_id, cs in cases.items():
                verdict = ("no case" if not cs else f"refused {sum(c.refused for c in cs)}/{len(cs)}"
                           if all(c.refused for c in cs) else "ACCEPTED")
                print(f"    tool  {rule_id:<44} {verdict:<14} {cs[0].source if cs else spec.rule(rule_id).no_example}")
            print(f"    agent {', '.join(agent)}")
            if terms:
                print(f"    terms {', '.join(terms)}")


if __name__ == "__main__":
    main()
