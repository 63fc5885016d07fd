"""Upstream's GetServiceHash, ported (kccm.providers.alibabacloud.loadbalancer.servicehash).

Every expected value was computed by upstream's own Go code (cloud-provider-alibaba-cloud
v2.14.0 ``helper.GetServiceHash`` over the same Service, decoded into ``v1.Service``): the
table covers the Service fields it reads, the zero values it drops, and the YAML quoting,
folding and key order of its text."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.providers.alibabacloud.loadbalancer.servicehash import service_hash

P80 = {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 80, "nodePort": 30080}
P443 = {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "web", "nodePort": 30443}
P443["appProtocol"] = "https"
LONG = "the quick brown fox jumps over the lazy dog " * 4
KEYS = (
    "a10",
    "a9",
    "a-b",
    "a_b",
    "A",
    "b",
    "a",
    "a09",
    "a009",
    "x.y/z",
    "1",
    "10",
    "2",
    "\u00e9",
    "Z",
)
UPSTREAM = {
    "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-spec": "slb.s1.small",
    "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-address-type": "intranet",
    "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-health-check-flag": "on",
}


def _svc(
    annotations: dict[str, str] | None = None,
    ports: list[dict[str, Any]] | None = None,
    deletionTimestamp: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "s", "namespace": "default"}
    if annotations is not None:
        meta["annotations"] = annotations
    if deletionTimestamp:
        meta["deletionTimestamp"] = deletionTimestamp
    base = {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster"}
    return {"metadata": meta, "spec": {**base, "ports": [P80] if ports is None else ports, **spec}}


CASES = [
    (_svc(), "9c89f4d33091dba35b566fae2b74570d5e96c7bdfc286896199438a0", "minimal"),
    (
        _svc(ports=[P80, P443]),
        "c4ecaccbb3dcb877e6d854694bd72b1d59cda91f78fb98ed8aa8639a",
        "two-ports-named-string-target",
    ),
    (
        _svc(ports=[{"protocol": "UDP", "port": 53, "targetPort": 53}]),
        "bb8c2cdffcb01f4060db38df2e3b957c2b6d99957a703e59d5e39ce3",
        "no-nodeport-no-name",
    ),
    (
        _svc(loadBalancerClass="alibabacloud.com/nlb"),
        "2926ff14ccb42439aba24ec068a7c94f1ebf4ebf5ee4f07fe0e42e15",
        "nlb-class",
    ),
    (
        _svc(loadBalancerClass=""),
        "9c89f4d33091dba35b566fae2b74570d5e96c7bdfc286896199438a0",
        "empty-class",
    ),
    (
        _svc(externalTrafficPolicy="Local"),
        "9e1f091978e02ee23badd2282aa10a3354f3b8dca2392d0c8cbf31ca",
        "local-policy",
    ),
    (
        _svc(loadBalancerSourceRanges=["10.0.0.0/8", "192.168.0.0/16"]),
        "7007c666bd8234a7552060bb56cd991384de2e85828b8e936ea64e23",
        "source-ranges",
    ),
    (
        _svc(loadBalancerSourceRanges=[]),
        "9c89f4d33091dba35b566fae2b74570d5e96c7bdfc286896199438a0",
        "empty-source-ranges",
    ),
    (
        _svc({"alibabacloud.com/reconcile.hash": "x", "a": "b"}),
        "05e4d30278c0e0e32070238ea2571e405680507523dd9eceeebd3160",
        "reconcile-hash-annotation-dropped",
    ),
    (
        _svc({"a": ""}),
        "9c89f4d33091dba35b566fae2b74570d5e96c7bdfc286896199438a0",
        "only-empty-annotation",
    ),
    (
        _svc(dict.fromkeys(KEYS, "v")),
        "af76f93dfd5c82c3b414c1fef652dae64d37059083e6c42c1d83c1d6",
        "key-order",
    ),
    (
        _svc(UPSTREAM),
        "4572ff3ee0cf421756449f7af46ba5843f6b9a57fd05bc8dc834b646",
        "upstream-annotations",
    ),
    (_svc(ports=[]), "a8982b4ddfd1a7e9b34055cd38880f7bffe15b8a9fa53620bed2cf59", "no-ports"),
    ({}, "c7415109a740bc1695432b036295e1435149d19493c3c9fba84e15b4", "nothing"),
    (
        _svc(deletionTimestamp="2026-11-29T05:00:00Z"),
        "65bf0b978348bdf44af88f6938a41b8ff2a03f6d79ee8ca2d636b380",
        "deleting",
    ),
    (
        _svc({"k": "true"}),
        "c50ec5a20c3daa014b3228ffb472d7572160f3a833a78e072f0cd2c0",
        "value-bool-word",
    ),
    (_svc({"k": "80"}), "0c02c1c725ab774cbf873a92a7fff68d4ee79913a18f5e6504d53c4a", "value-number"),
    (_svc({"k": "yes"}), "412ca5b40613e61adf90fd27fa773ba2933d5c19cfd4255fa32eff5a", "value-yes"),
    (_svc({"k": "1.5"}), "31a5459c564559e8910dc17cce171cf5fa714dfb21c3f1ab14af8a3c", "value-float"),
    (_svc({"k": "0x1F"}), "f051a2a8b4dc16f62659665f36ffb4054d58e0da17069b73b8cf055b", "value-hex"),
    (
        _svc({"k": "2026-01-01"}),
        "226ed132d62fff8571d35a21f53beff4310c595398b94813654f16f0",
        "value-date",
    ),
    (
        _svc({"k": "a: b"}),
        "d070ff7b7fd832d62f5ffc498e07136204f6c53a4d8bad81da0c8c8e",
        "value-colon-space",
    ),
    (
        _svc({"k": "#x"}),
        "9b0e47e4aac20cef93da448e238edc124f3d573c028679b4cf1f5760",
        "value-hash-first",
    ),
    (
        _svc({"k": " lead"}),
        "5183318c87957c7aa1d2fc8d0581c6a601c4ef407e2cc1212bf10b79",
        "value-leading-space",
    ),
    (
        _svc({"k": "trail "}),
        "1453634512102dc74a52e2ecb05fe4abfd9340df24b89b87036ac680",
        "value-trailing-space",
    ),
    (
        _svc({"k": "- x"}),
        "6a87bc776d3a64052780534859a393645abcb202cc1760e86e02018b",
        "value-dash-space",
    ),
    (
        _svc({"k": "multi\nline"}),
        "31058f87fda8080449f4e1cc280812098cd54b62ee473f41786eaf43",
        "value-two-lines",
    ),
    (
        _svc({"k": "multi\nline\n"}),
        "75f749f0d46f4d34a1dd8f347d176c929f0c34e67a69389f40785687",
        "value-trailing-newline",
    ),
    (
        _svc({"k": "x\n\n"}),
        "67c09d0debf75aa235c65d2fe48d0225bfae06e15c31c761f00e6d87",
        "value-two-trailing-newlines",
    ),
    (
        _svc({"k": "\nlead"}),
        "8672345e2309a858b706f1394886d888ff097961b6de3d891a47a566",
        "value-leading-newline",
    ),
    (
        _svc({"k": "tab\there"}),
        "39041fe0941f6a9ebbc9c9dd45a45c8db1caa9293d00d692fea8a65d",
        "value-tab",
    ),
    (
        _svc({"k": "é unicode"}),
        "c59e345ae28bcbccd59691141ccb0211ab4849b9ac63ab759fab6012",
        "value-unicode",
    ),
    (
        _svc({"k": "emoji 😀"}),
        "2a750278567c0f97bac14d419c7f9a5e32c0ec357019563d712f40f3",
        "value-emoji",
    ),
    (
        _svc({"k": "quote'q"}),
        "5dee386445bfe323040b37712e47c8329e987729c47edcf645279100",
        "value-single-quote",
    ),
    (
        _svc({"k": 'dq"q'}),
        "36cd46660cee5bcb7ee270c801663501fe7b9dd0686f758db28b3463",
        "value-double-quote",
    ),
    (
        _svc({"k": LONG.strip()}),
        "3ee797246605f9e89e6f689ceb3c4943e3c78ee09041d478faab2c2b",
        "value-long-words",
    ),
    (
        _svc({"k": LONG}),
        "92d18a7a79b4a5cd188ccdc65d3f3371c9f2641afd7156f5f81e586c",
        "value-long-words-trailing-space",
    ),
    (
        _svc({"k": "{" + LONG + "}"}),
        "5df62e62a3d94c22f501442ff3d09a84617b5d5148a8738ad374f4b8",
        "value-long-flow-indicator",
    ),
    (
        _svc({"k": "a:b"}),
        "caa4fd8801939ee6893d7b40e482e6242aaf7621b28521829d165242",
        "value-colon-no-space",
    ),
    (
        _svc({"k": "10:30"}),
        "b7d03a8be1f20d91bb3980624fb6b4e574ba571ab2c47aeff0bb5985",
        "value-base60",
    ),
    (
        _svc({"k": "1_000"}),
        "fe8d2d586a2335b4b2c5b69f2eaa64370992b44b6809137e14e537c0",
        "value-underscored-int",
    ),
    (
        _svc({"k": "-"}),
        "1af3120f399cbd7e86b28e38acaf083d1d925795126d4446a23017fa",
        "value-lone-dash",
    ),
    (_svc({"k": "~"}), "9f34c3c97cc9e6b9911972d523c98cb42227acc86024b5c409067dba", "value-tilde"),
    (
        _svc({"k": "null"}),
        "5a16007d670c72e09841862e30c4a9d77b8afd272be7642e8bfbe0d6",
        "value-null-word",
    ),
    (
        _svc({"k": "08"}),
        "d834e23eaefecae39910ab333f95ef7d418b86036238ff984e28ef47",
        "value-leading-zero",
    ),
    (
        _svc({"k": "1e3"}),
        "1cf8455a138b3d8baf7e45cd788403d8c9adf4524c68b27ca9c002b1",
        "value-exponent",
    ),
    (
        _svc({"k": ".5"}),
        "47db7b2c82ffacf4709debd4653393adf3536b9c916a684e96c708df",
        "value-dot-float",
    ),
    (
        _svc({"k": "+1"}),
        "0164c836cb6e277edfc87ff850e797f2345588a089365ca89789d69f",
        "value-plus-int",
    ),
    (
        _svc({"k": "0o17"}),
        "7a4bf167270beccd46e5ca7c08dfd3d78f288c5a0584edea1350e6a7",
        "value-octal",
    ),
    (
        _svc({"k": "2026-1-2T3:04:05Z"}),
        "6acde94ad532a2b6d3cea2d6eea2c9a46f19177fcc206743639ec317",
        "value-timestamp",
    ),
    (
        _svc({"k": "2026-01-02 10:00:00"}),
        "c4ed683e9670e2f2b386076b5fabb23dacf5acdeb396484d28817deb",
        "value-space-timestamp",
    ),
    (
        _svc({"k": "x #y"}),
        "782897326e23f766545404d1002904ece9505288d8bee09d5d71a187",
        "value-space-hash",
    ),
    (
        _svc({"k": "a  b"}),
        "6141a2848867262298068e9f4160967b12191c378e34a819ae0deda9",
        "value-two-spaces",
    ),
    (
        _svc({"k": "---x"}),
        "276fd017f274de8a597d2af7ed711a57f07940b191b56fe86f9e2f27",
        "value-document-start",
    ),
    (
        _svc({"k": "?"}),
        "56afb1d16bab3cd6e7530c51ad4d123a867e75d7ed097d7ac25c8928",
        "value-lone-question",
    ),
    (
        _svc({"k": ":x"}),
        "6dad41387bde20c0928f2c2e1d77ef335d39093ccfddbcdec793718f",
        "value-colon-first",
    ),
    (
        _svc({"k": "*a"}),
        "b5912b010fc2be60675e75a45d29957694ad873f2ed1152f11eb31e9",
        "value-alias-first",
    ),
    (
        _svc({"k": "<<"}),
        "9f618233f0fbd12924da2d01ce68a2294b6793eecdfd62e1c6e56cff",
        "value-merge-key",
    ),
    (
        _svc({"k": "a\xa0b"}),
        "96e134c7a0393689595296a762f8b4a5c8de6b0217374226849fc092",
        "value-nbsp",
    ),
    (
        _svc({"k": "a\u2028b"}),
        "52ab1040014536e7cc377ecc5582d800f370420ff9806710778c819c",
        "value-line-separator",
    ),
    (
        _svc({"k": "\u00e9" * 90}),
        "04fd8b746379c20001d660ef381cfba1e4bdf19bc5519d0bc0ae630b",
        "value-long-unicode",
    ),
    (
        _svc({"k": "word " * 30 + ": x"}),
        "8f0f15f72d16d67ff845d02c0cec75b149b0601793f678c928612b94",
        "value-long-words-then-colon",
    ),
    (
        _svc({"k": '"' + LONG + '"'}),
        "e95cfbefdf5b39f2b0268e632b9f18a1602547ea83ed716706d0b6e2",
        "value-long-double-quoted",
    ),
    (
        _svc({"k": "line one\n  indented\n\nlast"}),
        "3425bb27097e6c737081aae7fdcd0ba099cf66d1c07e67ce1014c75a",
        "value-indented-lines",
    ),
    (
        _svc({"k": " " + LONG}),
        "d6074e8d0e09435af7a9d1bd5336a855e6a4fe0d25a69f08d6faad06",
        "value-long-leading-space",
    ),
    (
        _svc({"true": "v"}),
        "b78d4f3ef034347504285a23824ac2673b4d134dba9135ccd3c366ca",
        "key-bool-word",
    ),
    (_svc({"80": "v"}), "a3a94ae7477e0f5b67eadfa8df659c23857554d3a0d11edc4a91257f", "key-number"),
    (
        _svc({"a: b": "v"}),
        "594417ff584a880a3a667805f51580d118509d5fbb735e72957e4a1a",
        "key-colon-space",
    ),
    (
        _svc({" lead": "v"}),
        "4c56c5dda64fae043d83f214e8ff083ee165e53b97bf6a5bcfeccd9c",
        "key-leading-space",
    ),
    (
        _svc({"tab\there": "v"}),
        "28833afc83cbfbc61adf7ec23a74abf500bb76fdfdb61a7b50fd9ec0",
        "key-tab",
    ),
    (
        _svc({"emoji 😀": "v"}),
        "66c04b7feeae52ac131d23b16d33720aea78afc0164a20fe240495cf",
        "key-emoji",
    ),
    (
        _svc({"quote'q": "v"}),
        "c44115e9d39ea7fdd68d00794c94fcf247d2204aa5f9609278684afe",
        "key-single-quote",
    ),
    (
        _svc({"10:30": "v"}),
        "b663cc3c9473e31b2e037b2f3c7c41bb99e74a083fb80486c9cd51e2",
        "key-base60",
    ),
    (
        _svc({"2026-1-2T3:04:05Z": "v"}),
        "d5594a395cfbd7c0acf43cb6652c7a622e295b61be0687667a41b0d8",
        "key-timestamp",
    ),
    (
        _svc({"a" * 130: "v", "b": "w"}),
        "a049bfd8f54caff51e4fb65215b675f5036b95c597d7128089da4551",
        "key-complex",
    ),
    (
        _svc({"x" * 128: "v", "b": "w"}),
        "07462995e8a487af3a7b6ff614e5ecf570855284e7a8fffe5d60f90c",
        "key-128-bytes",
    ),
    (
        _svc({("word " * 30).strip(): "v", "b": "w"}),
        "dffc5cecf32b034e8cd41c3942fb8a7c9a4bea72e533c9c33fb87c2e",
        "key-complex-folded",
    ),
    (
        _svc({"a\u2028b": "v", "b": "w"}),
        "18af805e33ab8dabc3f25a7b822f2120bcba0603aab9e9eb54c63928",
        "key-line-separator",
    ),
    (
        _svc({"multi\nline": "v", "b": "w"}),
        "146f7e72950e65384e9d834a1bb6d88e8b646af624f7e648224db7c2",
        "key-two-lines",
    ),
    (
        _svc({"true" + "x" * 130: "v", "b": "w"}),
        "03a32ecea3181e95f42d16eb632a64f262e57287ddd8cf165a69eb12",
        "key-complex-word",
    ),
]


@pytest.mark.parametrize(("service", "expected"), [pytest.param(s, h, id=i) for s, h, i in CASES])
def test_service_hash_is_upstream_s(service: dict[str, Any], expected: str) -> None:
    assert service_hash(service) == expected
