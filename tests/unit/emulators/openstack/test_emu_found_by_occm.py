"""What running upstream's OCCM (and migrating from it to kccm) against the emulator showed it
answering differently from OpenStack (tests/integration/openstack/test_occm_*.py):

- Octavia's address attributes are ``types.IPAddressType`` (octavia/api/common/types.py): an
  IPv4 or IPv6 address or wsme's 400, on every path that makes a member. OCCM's serial member
  path (``pkg/util/openstack/loadbalancer_serial.go``, ``getNodeAddressForLB``) sends a Node's
  host name while the Node has no InternalIP yet; Octavia refuses it, the emulator took it.
- Deleting a balancer deletes its VIP port, and Neutron's port delete disassociates the port's
  floating IPs (neutron/db/l3_db.py, ``disassociate_floatingips``): a floating IP the user
  chose with ``loadBalancerIP`` (which OCCM does not delete) is left unassociated; the emulator
  left it pointing at the deleted port.
"""

from __future__ import annotations

from typing import Any

import pytest
from emu_api import LB, NET, Api

NOT_AN_IP = (
    "Invalid input for field/attribute {name}. Value: '{value}'. "
    "Value should be IPv4 or IPv6 format"
)


async def _pool(api: Api) -> dict[str, Any]:
    spec = {
        "name": "kube_service_c_ns_svc",
        "vip_subnet_id": api.cfg["private_subnet_id"],
        "listeners": [
            {
                "name": "listener_0",
                "protocol": "TCP",
                "protocol_port": 80,
                "default_pool": {
                    "name": "pool_1",
                    "protocol": "TCP",
                    "lb_algorithm": "ROUND_ROBIN",
                },
            }
        ],
    }
    lb = (await api.ok("POST", f"{LB}/loadbalancers", {"loadbalancer": spec}))["loadbalancer"]
    api.settle()
    return dict(lb["pools"][0])


@pytest.mark.parametrize(
    ("member", "name", "value"),
    [
        pytest.param({"address": "node-b"}, "address", "node-b", id="host-name"),
        pytest.param({"address": "10.0.0.300"}, "address", "10.0.0.300", id="bad-ipv4"),
        pytest.param(
            {"address": "10.0.0.5", "monitor_address": "nope"},
            "monitor_address",
            "nope",
            id="monitor-address",
        ),
    ],
)
@pytest.mark.parametrize("path", ["post", "batch", "fully-populated"])
async def test_a_member_address_that_is_no_ip_is_refused(
    api: Api, member: dict[str, Any], name: str, value: str, path: str
) -> None:
    member = {"protocol_port": 30080, **member}
    expected = {"faultcode": "Client", "faultstring": NOT_AN_IP.format(name=name, value=value)}
    if path == "fully-populated":
        spec = {
            "name": "lb",
            "vip_subnet_id": api.cfg["private_subnet_id"],
            "listeners": [
                {
                    "protocol": "TCP",
                    "protocol_port": 80,
                    "default_pool": {
                        "name": "pool_1",
                        "protocol": "TCP",
                        "lb_algorithm": "ROUND_ROBIN",
                        "members": [member],
                    },
                }
            ],
        }
        status, body = await api.call("POST", f"{LB}/loadbalancers", {"loadbalancer": spec})
    else:
        pool = await _pool(api)
        members = f"{LB}/pools/{pool['id']}/members"
        if path == "post":
            status, body = await api.call("POST", members, {"member": member})
        else:
            status, body = await api.call("PUT", members, {"members": [member]})
    assert status == 400
    assert {k: body[k] for k in expected} == expected


async def test_ipv4_and_ipv6_member_addresses_are_taken(api: Api) -> None:
    pool = await _pool(api)
    members = f"{LB}/pools/{pool['id']}/members"
    for address in ("10.0.0.5", "fd00::5"):
        body = {"member": {"address": address, "protocol_port": 30080}}
        made = (await api.ok("POST", members, body))["member"]
        assert made["address"] == address
        api.settle()


async def test_deleting_a_balancer_disassociates_the_floating_ip_of_its_vip_port(
    api: Api,
) -> None:
    pool = await _pool(api)
    (lb,) = (await api.ok("GET", f"{LB}/loadbalancers"))["loadbalancers"]
    assert pool["id"]
    body = {"floating_network_id": api.cfg["public_network_id"], "port_id": lb["vip_port_id"]}
    fip = (await api.ok("POST", f"{NET}/floatingips", {"floatingip": body}))["floatingip"]
    assert fip["port_id"] == lb["vip_port_id"]

    await api.ok("DELETE", f"{LB}/loadbalancers/{lb['id']}?cascade=true")
    api.settle()

    status, _ = await api.call("GET", f"{NET}/ports/{lb['vip_port_id']}")
    assert status == 404
    kept = (await api.ok("GET", f"{NET}/floatingips/{fip['id']}"))["floatingip"]
    assert (kept["port_id"], kept["fixed_ip_address"], kept["status"]) == (None, None, "DOWN")
