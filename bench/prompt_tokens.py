"""Where an evaluation prompt's tokens go: per domain and user role, the system prompt the gold-blind evaluation
shows (policy + the role's whole catalog as JSON, with prices), split into policy and tools, beside what the tools
would take written one line each (``environment.tool_format: lines``: ``name(arg: type, opt?: a|b): description
[price]``).

Why it matters (issue 40): SmolLM2-135M reads its user's request only after this prompt, and every CPU learning run
so far that listed the whole catalog scored 0; a shorter catalog is the cheapest lever left on a 2-core machine.

Run: PYTHONPATH=. python bench/prompt_tokens.py [--work-dir work] [--domains weather restaurant ...]
"""

from __future__ import annotations

import argparse
import json

from domains.registry import DOMAIN_NAMES, get_engine, get_spec
from train.environment.env import listed_prices, system_prompt
from train.environment.tools.base import ToolCatalog
from train.environment.tools.domain import domain_tools
from train.models.model import load_tokenizer, smollm2_folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work-dir", default="work", help="where the SmolLM2 folder is converted once (default: work)")
    ap.add_argument("--domains", nargs="*", default=list(DOMAIN_NAMES))
    args = ap.parse_args()
    tokenizer = load_tokenizer(str(smollm2_folder(args.work_dir)))

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    print(f"{'domain':<14}{'role':<10}{'tools':>6}{'prompt':>8}{'policy':>8}{'tools json':>11}{'one line':>10}"
          f"{'prompt, one line':>18}")
    for domain in args.domains:
        spec = get_spec(domain)
        agent = {t.name for t in spec.side_tools("agent")}
        roles = [r for r in spec.users.roles if r.may_call] if spec.users is not None else []
        for role in roles or [None]:
            allowed = None if role is None else tuple(n for n in role.may_call if n in agent)
            with get_engine(domain, 0).fresh() as db:
                catalog = ToolCatalog(domain_tools(db, allowed))
                prices = listed_prices(catalog)
                prompt = system_prompt(spec.policy, catalog, prices)
                short_prompt = system_prompt(spec.policy, catalog, prices, tool_format="lines")
            shown = json.dumps([{**s, **prices[s["name"]]} for s in catalog.schemas()], ensure_ascii=False)
            assert shown in prompt, "the prompt's tool list is not the priced JSON this bench rebuilds"
            lines = short_prompt.split("# Tools\n", 1)[1].split("\n\n", 1)[0]
            whole, policy, tools, short = count(prompt), count(spec.policy), count(shown), count(short_prompt)
            print(f"{domain:<14}{(role.name if role else '-'):<10}{len(catalog.names):>6}{whole:>8}{policy:>8}"
                  f"{tools:>11}{count(lines):>10}{short:>18}")


if __name__ == "__main__":
    main()
