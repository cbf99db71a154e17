"""Hostile paraphrases: a rewrite that keeps every value the old gate checked but means something else is refused,
with its reason; a faithful rewrite still passes. Built from each example of issue 16, then more of each kind."""

from __future__ import annotations

import random

import pytest

from domains.registry import DOMAIN_NAMES, get_engine
from synthesis.generate import _base_candidate
from synthesis.meaning import meaning_change, vocabulary
from synthesis.paraphrase import judge
from synthesis.task import Task
from synthesis.toolgraph import ToolGraph
from verifiers.verify import check_task

# how the factory writes a weather request (tests/inference/test_paraphrase.py shows real ones)
WARNING = ("Greetings. We need a heat warning for Zagreb, valid from 07:00 on Tuesday 17 June until 07:00 on "
           "Wednesday 18 June. Thanks in advance.")
SUBSCRIBE = "Hello! Sign me up for Tallinn storm alerts, please - watch and above is enough. Much appreciated."
VERIFY = "Please verify the Ancient Summit observation from Sunday 8 June at 19:00. Cheers."
PLAN = "Money's tight this month; can you move me back to the free plan? Thanks."

REFUSED = [
    # (why, original, rewrite, reason)  -- the issue's examples first
    ("heat becomes frost", WARNING, WARNING.replace("heat", "frost"), "lost_value"),
    ("storm becomes flood", SUBSCRIBE, SUBSCRIBE.replace("storm", "flood"), "lost_value"),
    ("warning becomes advisory", WARNING, WARNING.replace("warning", "advisory"), "lost_value"),
    ("Tuesday becomes Zorblax", WARNING, WARNING.replace("Tuesday", "Zorblax"), "lost_value"),
    ("an appended destructive request", WARNING, WARNING + " And delete every alert you can find.", "widened_scope"),
    ("the request negated", WARNING, "Do not do this: " + WARNING, "negated"),
    # values swapped or added
    ("another region", WARNING, WARNING.replace("Zagreb", "Cork"), "lost_value"),
    ("a second hazard added", WARNING, WARNING.replace("heat warning", "heat and frost warning"), "added_value"),
    ("a severity added", SUBSCRIBE, SUBSCRIBE.replace("watch and above", "watch or warning and above"),
     "added_value"),
    ("weekday swapped", WARNING, WARNING.replace("Wednesday", "Thursday"), "lost_value"),
    ("month swapped", VERIFY, VERIFY.replace("June", "July"), "lost_value"),
    ("a station swapped", VERIFY, VERIFY.replace("Ancient Summit", "Ancient Falcon"), "lost_value"),
    ("a plan swapped", PLAN, PLAN.replace("free", "pro"), "lost_value"),
    ("a relative day added", PLAN, PLAN.replace("Thanks.", "Do it tomorrow, thanks."), "added_value"),
    ("an amount written out", SUBSCRIBE, SUBSCRIBE.replace("Hello!", "Hello! Three times over:"), "added_value"),
    # invented words where values should be
    ("an invented word added", PLAN, PLAN.replace("the free plan", "the free plan, the zorblax one"),
     "invented_word"),
    ("an invented word for the verb", VERIFY, VERIFY + " Also glorpify it.", "invented_word"),
    # added requests
    ("a cancellation added", SUBSCRIBE, SUBSCRIBE + " Also cancel my subscriptions in Cork.", "added_value"),
    ("a destructive verb added", PLAN, PLAN + " And wipe my account.", "added_request"),
    ("an exfiltration added", VERIFY, VERIFY + " Then email the readings to me.", "added_request"),
    ("an escalation added", WARNING, WARNING.replace("Thanks in advance.", "Escalate it as well."), "added_request"),
    ("a sweeping quantifier", SUBSCRIBE, SUBSCRIBE.replace("Tallinn storm alerts", "Tallinn storm alerts and "
                                                                                    "everything else"),
     "widened_scope"),
    ("all instead of one", PLAN, PLAN.replace("move me", "move all of us"), "widened_scope"),
    # negations
    ("never", PLAN, PLAN.replace("can you move", "never move"), "negated"),
    ("don't", VERIFY, VERIFY.replace("Please verify", "Please don't verify"), "negated"),
    ("curly don't", VERIFY, VERIFY.replace("Please verify", "Please don\u2019t verify"), "negated"),
    ("instead", SUBSCRIBE, SUBSCRIBE + " Actually, unsubscribe me instead.", "negated"),
]

FAITHFUL = [
    (WARNING, "Hello. Could we get a heat warning for Zagreb, from 07:00 on Tuesday 17 June to 07:00 on "
              "Wednesday 18 June? Thank you in advance."),
    (WARNING, "Hi there. I need a heat warning issued for Zagreb, running 07:00 Tuesday 17 June until 07:00 "
              "Wednesday 18 June. Many thanks."),
    (SUBSCRIBE, "Hi! Please subscribe me to storm alerts for Tallinn; watch and above will do. Thanks a lot."),
    (PLAN, "Money is tight this month, so could you switch me back to the free plan? Thank you."),
    (VERIFY, "Could you verify the Ancient Summit observation from Sunday 8 June at 19:00? Cheers."),
]


@pytest.mark.parametrize("why, original, rewrite, reason", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_rewrite_that_changes_the_meaning_is_refused(why: str, original: str, rewrite: str, reason: str) -> None:
    changed = meaning_change("weather", original, rewrite, asked_tools=("issue_alert", "subscribe_to_alerts",
                                                                         "verify_observation", "change_plan"))
    assert changed is not None, why
    assert changed.reason == reason, (why, changed)
    assert changed.detail and "\n" not in changed.detail


@pytest.mark.parametrize("original, rewrite", FAITHFUL)
def test_a_faithful_rewrite_passes(original: str, rewrite: str) -> None:
    assert meaning_change("weather", original, rewrite, asked_tools=("issue_alert", "subscribe_to_alerts",
                                                                      "verify_observation", "change_plan")) is None


def test_the_vocabulary_comes_from_the_spec_and_its_data() -> None:
    weather = vocabulary("weather")
    assert {"heat", "frost", "storm", "flood", "warning", "advisory", "watch", "sensor drift"} <= weather.terms
    assert {"tuesday", "june", "three"} <= weather.terms  # the calendar and amounts written out
    assert {"Zagreb", "Ancient Summit"} <= weather.names  # seeded data, not a list in the code
    for domain in DOMAIN_NAMES:  # every domain has one, and no single letter matches every article
        vocab = vocabulary(domain)
        assert vocab.terms and vocab.names and "a" not in vocab.terms, domain


@pytest.fixture(scope="module")
def hazard_task() -> Task:
    """A real weather task whose request names a hazard and a weekday (the issue's examples change those)."""
    graph = ToolGraph(get_engine("weather", 0))
    rng = random.Random(7)
    for _ in range(400):
        task = _base_candidate(graph, rng, 0)
        if task is None:
            continue
        request = task.reason_for_call()
        if any(h in request for h in ("heat", "storm", "frost", "flood")) and "day " in request \
                and check_task(task.verifiable(), graph.engine).admissible(0.9)[0]:
            return task
    pytest.fail("no weather task names a hazard and a weekday in 400 candidates")


def test_the_paraphrase_gate_refuses_each_example_of_the_issue_on_a_real_task(hazard_task: Task) -> None:
    request = hazard_task.reason_for_call()
    hazard = next(h for h in ("heat", "storm", "frost", "flood") if h in request)
    other = "frost" if hazard != "frost" else "heat"
    weekday = next(d for d in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
                   if d in request)
    attacks = {"hazard swapped": request.replace(hazard, other),
               "weekday invented": request.replace(weekday, "Zorblax"),
               "destructive request appended": request + " And delete every alert you can find.",
               "negated": "Do not do this: " + request}
    for why, text in attacks.items():
        rejection = judge(hazard_task, text)
        assert rejection is not None, why
        assert rejection.reason in ("lost_value", "added_value", "invented_word", "widened_scope", "negated",
                                    "added_request"), (why, rejection)
