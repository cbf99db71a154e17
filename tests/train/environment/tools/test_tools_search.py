"""Local search finds the passage a question needs and cites its document id."""

from __future__ import annotations

import json

import pytest

from domains.registry import DOMAIN_NAMES, get_spec
from train.environment.tools import LocalSearchTool, domain_index
from train.environment.tools.search import domain_documents, policy_sentences


def policy_docs_with(domain: str, phrase: str) -> set[str]:
    """The ids of the policy sentences containing ``phrase``: the prose and, where it states a decision's rule, the
    rule list (expectations follow the spec, not fixed ids)."""
    ids = {d.doc_id for d in domain_documents(get_spec(domain))
           if d.doc_id.startswith("policy#") and phrase in d.text}
    assert 1 <= len(ids) <= 2, (phrase, ids)
    return ids


def cited(domain: str, query: str, k: int = 3) -> list[str]:
    result = LocalSearchTool(get_spec(domain)).call({"query": query, "k": k})
    assert result.ok, result.error
    return [hit["id"] for hit in json.loads(result.observation)["results"]]


@pytest.mark.parametrize("domain,query,phrase", [
    ("railway", "How much money do I get back if I cancel my ticket before the train leaves?",
     "10% administration fee"),
    ("railway", "My train arrived 40 minutes late, what compensation can I claim?", "Delay compensation is paid"),
    ("railway", "Which ages can buy a youth railcard?", "youth railcard is for ages 16 to 25"),
    ("weather", "How many alert subscriptions can a free plan user follow?", "Free-plan subscribers may follow at most two active alert subscriptions, all"),
    ("weather", "Can I record an observation for a station that is not active?", "only be recorded for active"),
])
def test_policy_questions_cite_the_rule(domain: str, query: str, phrase: str):
    assert policy_docs_with(domain, phrase) & set(cited(domain, query))


def test_tool_and_table_docs_are_found():
    assert "tool:refund_ticket" in cited("railway", "refund a ticket", k=3)
    assert "tool:claim_delay_compensation" in cited("railway", "claim delay compensation for a late train", k=3)
    columns = cited("railway", "what columns does a ticket have: seat, fare, status", k=5)
    assert any(i.startswith("table:") for i in columns)


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
def test_documents_cover_policy_tools_and_tables(domain: str):
    spec = get_spec(domain)
    ids = [d.doc_id for d in domain_documents(spec)]
    assert len(ids) == len(set(ids))
    assert {f"tool:{t.name}" for t in spec.tools} <= set(ids)
    assert {f"table:{t.name}" for t in spec.tables} <= set(ids)
    assert sum(i.startswith("policy#") for i in ids) == len(policy_sentences(spec.policy)) >= 3
    assert all(d.text.strip() for d in domain_documents(spec))


def test_index_is_built_once_per_domain():
    spec = get_spec("railway")
    assert domain_index(spec) is domain_index(spec)


def test_bad_arguments_are_errors_not_exceptions():
    tool = LocalSearchTool(get_spec("railway"))
    for args in ({}, {"query": ""}, {"query": "refund", "k": 0}, {"query": "refund", "extra": 1}, ["refund"]):
        result = tool.call(args)
        assert not result.ok and result.error and json.loads(result.observation) == {"error": result.error}


def test_sentence_split_keeps_abbreviations():
    assert policy_sentences("Ids look like e.g. ST001 here. Next rule.\n\nNew paragraph!") == [
        "Ids look like e.g. ST001 here.", "Next rule.", "New paragraph!"]
