"""The provider API-call ledger: reads and writes counted apart, differences between snapshots."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import CloudAPICalls, as_api_call_reporter, classify_by_verb
from kccm.cloudprovider.apicalls import register_api_call_metrics


@pytest.mark.parametrize(
    ("operation", "mutating"),
    [
        pytest.param("DescribeInstances", False, id="describe-reads"),
        pytest.param("elbv2:describe_target_groups", False, id="snake-case-with-service-reads"),
        pytest.param("GetTags", False, id="get-reads"),
        pytest.param("ListTagsForResource", False, id="list-reads"),
        pytest.param("CreateListener", True, id="create-writes"),
        pytest.param("modify_target_group", True, id="modify-writes"),
        pytest.param("RegisterTargets", True, id="register-writes"),
        pytest.param("AuthorizeSecurityGroupIngress", True, id="authorize-writes"),
    ],
)
def test_classify_by_verb(operation: str, mutating: bool) -> None:
    assert classify_by_verb(operation) is mutating


def test_a_snapshot_difference_names_only_the_new_calls() -> None:
    ledger = CloudAPICalls()
    ledger.record("DescribeLoadBalancers", mutating=False)
    before = ledger.snapshot()
    ledger.record("DescribeLoadBalancers", mutating=False, count=2)
    ledger.record("CreateListener", mutating=True)
    diff = ledger.snapshot().since(before)
    assert dict(diff.reads) == {"DescribeLoadBalancers": 2}
    assert dict(diff.writes) == {"CreateListener": 1}
    assert (diff.total_reads, diff.total_writes) == (2, 1)
    ledger.reset()
    assert ledger.snapshot().total_reads == 0


def test_a_provider_reports_its_ledger_only_when_it_has_one() -> None:
    class Reporting:
        def __init__(self) -> None:
            self.ledger = CloudAPICalls()

        def cloud_api_calls(self) -> CloudAPICalls:
            return self.ledger

    assert as_api_call_reporter(Reporting()) is not None
    assert as_api_call_reporter(object()) is None


def test_the_ledger_is_exported_as_a_counter_read_at_scrape_time() -> None:
    class Reporting:
        def __init__(self) -> None:
            self.ledger = CloudAPICalls()

        def cloud_api_calls(self) -> CloudAPICalls:
            return self.ledger

    cloud, registry = Reporting(), CollectorRegistry()
    assert register_api_call_metrics(cloud, registry)
    assert not register_api_call_metrics(object(), CollectorRegistry())
    cloud.ledger.record("DescribeLoadBalancers", mutating=False, count=3)
    cloud.ledger.record("CreateListener", mutating=True)
    name = "kccm_cloud_api_requests_total"
    read = {"operation": "DescribeLoadBalancers", "mutating": "false"}
    write = {"operation": "CreateListener", "mutating": "true"}
    assert registry.get_sample_value(name, read) == 3
    assert registry.get_sample_value(name, write) == 1
    cloud.ledger.record("CreateListener", mutating=True)
    assert registry.get_sample_value(name, write) == 2
