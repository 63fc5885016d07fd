"""Cloud config: gcfg syntax, YAML, and binding onto a provider's dataclass schema."""

# ruff: noqa: RUF009 - setting() is a dataclasses.field() factory

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.config import ConfigEntry, load_cloud_config, parse_gcfg, setting


@dataclass(frozen=True)
class Global:
    zone: str = setting(required=True)
    api_key: str = setting(default="", secret=True)
    retries: int = 3
    timeout: float = 1.5
    debug: bool = False
    subnets: list[str] = setting(default_factory=list)
    ports: list[int] = setting(default_factory=list)
    cluster_tag: str | None = setting(default=None, key="KubernetesClusterTag")


@dataclass(frozen=True)
class LBClass:
    scheme: str = "internet-facing"
    internal: bool = False


@dataclass(frozen=True)
class Config:
    global_: Global = setting(default_factory=Global)
    load_balancer: dict[str, LBClass] = setting(default_factory=dict)


@dataclass(frozen=True)
class Pin:
    pin: int = setting(default=0, secret=True)


@dataclass(frozen=True)
class PinConfig:
    global_: Pin = setting(default_factory=Pin)


@dataclass(frozen=True)
class Bad:
    when: bytes = b""


@dataclass(frozen=True)
class BadConfig:
    global_: Bad = setting(default_factory=Bad)


def load(text: str, **kwargs: object) -> Config:
    return load_cloud_config(text, Config, source="cloud.conf", **kwargs)  # type: ignore[arg-type]


# -- valid files -----------------------------------------------------------------------------------


def test_a_typical_file_binds_every_type() -> None:
    config = load(
        """
        ; a comment
        # another comment
        [Global]
        zone = eu-1a            ; trailing comment
        API-Key = "s3cr3t;#"
        retries = -2
        timeout = 2.5
        debug
        subnets = a
        subnets = b
        ports = 80
        ports = 443
        kubernetesclustertag = prod

        [LoadBalancer "internal"]
        scheme = internal
        internal = yes
        [loadbalancer "Public"]
        internal = off
        """
    )
    assert config == Config(
        global_=Global(
            zone="eu-1a",
            api_key="s3cr3t;#",
            retries=-2,
            timeout=2.5,
            debug=True,
            subnets=["a", "b"],
            ports=[80, 443],
            cluster_tag="prod",
        ),
        load_balancer={
            "internal": LBClass(scheme="internal", internal=True),
            "Public": LBClass(internal=False),
        },
    )


@pytest.mark.parametrize(
    ("line", "value"),
    [
        pytest.param('zone = "  padded  "', "  padded  ", id="quotes-keep-blanks"),
        pytest.param("zone = a   b", "a   b", id="inner-blanks-kept"),
        pytest.param("zone = a \\\n b", "a  b", id="line-continuation"),
        pytest.param('zone = "a\\tb\\n\\"c\\"\\\\"', 'a\tb\n"c"\\', id="escapes"),
        pytest.param('zone = x"y z"w', "xy zw", id="quotes-inside-a-value"),
        pytest.param("zone =", "", id="empty-value"),
        pytest.param('zone = "a # b" # c', "a # b", id="comment-chars-in-quotes"),
        pytest.param("ZONE=a", "a", id="case-insensitive-name-no-blanks"),
    ],
)
def test_value_syntax(line: str, value: str) -> None:
    assert load(f"[global]\n{line}\n").global_.zone == value


def test_an_empty_value_clears_a_multi_valued_key() -> None:
    assert load("[Global]\nzone=z\nsubnets=a\nsubnets=\nsubnets=b\n").global_.subnets == ["b"]


def test_a_repeated_single_value_keeps_the_last() -> None:
    assert load("[Global]\nzone=a\nzone=b\n").global_.zone == "b"


def test_no_file_gives_the_defaults_or_names_required_keys() -> None:
    assert load_cloud_config(None, PinConfig) == PinConfig()
    with pytest.raises(CloudConfigError) as caught:
        load_cloud_config(None, Config)
    assert caught.value.issues == [
        '<cloud-config>: section "global": key "zone": required key is not set '
        "(the section is missing)"
    ]


def test_the_stream_name_is_the_source() -> None:
    stream = io.StringIO("[Global]\nretries = many\nzone = z\n")
    stream.name = "/etc/kubernetes/cloud.conf"
    with pytest.raises(CloudConfigError, match=r"^/etc/kubernetes/cloud\.conf:2: section"):
        load_cloud_config(stream, Config)


def test_secrets_are_never_shown() -> None:
    config = load("[Global]\nzone = z\napi-key = hunter2\n")
    assert "hunter2" not in repr(config)
    assert config.global_.api_key == "hunter2"

    with pytest.raises(CloudConfigError) as caught:
        load_cloud_config("[Global]\npin = 12x4\n", PinConfig, source="c")
    assert str(caught.value) == 'c:2: section "Global": key "pin": invalid int'


def test_unknown_keys_can_be_allowed() -> None:
    assert (
        load("[Global]\nzone=z\nfuture=1\n[Other]\nx=1\n", allow_unknown=True).global_.zone == "z"
    )


def test_parse_gcfg_keeps_bare_variables_and_lines() -> None:
    parsed = parse_gcfg('[a "b"]\n  flag\nx = 1\n', "f")
    assert parsed.entries == (
        ConfigEntry("a", "b", "flag", None, 2),
        ConfigEntry("a", "b", "x", "1", 3),
    )


# -- YAML ------------------------------------------------------------------------------------------


def test_yaml_is_an_alternative_format() -> None:
    config = load_cloud_config(
        "global:\n  zone: z\n  debug: true\n  subnets: [a, b]\n  ports:\n    - 80\n"
        "load-balancer:\n  internal:\n    scheme: internal\n",
        Config,
    )
    assert config == Config(
        global_=Global(zone="z", debug=True, subnets=["a", "b"], ports=[80]),
        load_balancer={"internal": LBClass(scheme="internal")},
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "global:\n  zone: z\n  retries: lots\n",
            'c.yaml:3: section "global": key "retries": invalid int \'lots\'',
            id="yaml-bad-int",
        ),
        pytest.param(
            "global: [1, 2]\n",
            'c.yaml:1: section "global": expected a mapping of keys',
            id="yaml-section-not-a-mapping",
        ),
        pytest.param("- a\n", "c.yaml:1: the document must be a mapping", id="yaml-list-document"),
        pytest.param(
            "global:\n  zone: [a, b]\n",
            'c.yaml:2: section "global": key "zone": takes one value, not a list',
            id="yaml-flow-list-for-a-string-key",
        ),
        pytest.param(
            "global:\n  zone: z\n  retries:\n    - 1\n    - 2\n",
            'c.yaml:4: section "global": key "retries": takes one value, not a list',
            id="yaml-block-list-for-an-int-key",
        ),
        pytest.param(
            "global:\n  zone: z\n  debug: [true]\n",
            'c.yaml:3: section "global": key "debug": takes one value, not a list',
            id="yaml-one-item-list-for-a-bool-key",
        ),
        pytest.param(
            "global:\n  zone: z\nload-balancer:\n  x:\n    scheme: [a, b]\n",
            'c.yaml:5: section "load-balancer" subsection "x": key "scheme": '
            "takes one value, not a list",
            id="yaml-list-in-a-named-section",
        ),
        pytest.param(
            "global:\n  zone: [\n",
            "c.yaml:3: YAML syntax error: expected the node content, but found '<stream end>'",
            id="yaml-syntax",
        ),
    ],
)
def test_yaml_errors(text: str, message: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        load_cloud_config(text, Config, source="c.yaml")
    assert str(caught.value) == message


# -- malformed files: every error, with file:line, section and key ---------------------------------

MALFORMED = [
    pytest.param(
        "zone = a\n",
        "cloud.conf:1: syntax error: variable outside of any section "
        "(a [Section] header must come first)",
        id="variable-before-any-section",
    ),
    pytest.param(
        "[Global\nzone = a\n",
        'cloud.conf:1: syntax error: expected "]" to close section "Global"',
        id="unclosed-header",
    ),
    pytest.param(
        "[]\n",
        "cloud.conf:1: syntax error: missing or invalid section name (letters, "
        "digits, '-' and '.')",
        id="empty-section-name",
    ),
    pytest.param(
        '[LoadBalancer "abc]\n',
        "cloud.conf:1: syntax error: unterminated subsection name (missing closing quote)",
        id="unterminated-subsection",
    ),
    pytest.param(
        '[LoadBalancer "a\\zb"]\n',
        "cloud.conf:1: syntax error: invalid escape \\z in subsection name",
        id="bad-subsection-escape",
    ),
    pytest.param(
        "[Global] zone = a\n",
        "cloud.conf:1: syntax error in section \"Global\": unexpected 'z' after header",
        id="text-after-header",
    ),
    pytest.param(
        '[Global]\nzone = "abc\n',
        'cloud.conf:2: syntax error in section "Global": unterminated quoted value of "zone"',
        id="unterminated-quote",
    ),
    pytest.param(
        "[Global]\nzone = a\\qb\n",
        'cloud.conf:2: syntax error in section "Global": invalid escape \\q in value of "zone"',
        id="bad-value-escape",
    ),
    pytest.param(
        "[Global]\n9zone = a\n",
        "cloud.conf:2: syntax error in section \"Global\": invalid variable name starting at '9'",
        id="name-starts-with-digit",
    ),
    pytest.param(
        "[Global]\nzone: a\n",
        'cloud.conf:2: syntax error in section "Global": expected "=" after variable "zone"',
        id="colon-instead-of-equals",
    ),
    pytest.param(
        "[Global]\nzone = a\nretries = ten\n",
        'cloud.conf:3: section "Global": key "retries": invalid int \'ten\'',
        id="bad-int",
    ),
    pytest.param(
        "[Global]\nzone = a\ntimeout = soon\n",
        'cloud.conf:3: section "Global": key "timeout": invalid float \'soon\'',
        id="bad-float",
    ),
    pytest.param(
        "[Global]\nzone = a\ndebug = maybe\n",
        'cloud.conf:3: section "Global": key '
        "\"debug\": invalid bool (use true/false, yes/no, on/off or 1/0) 'maybe'",
        id="bad-bool",
    ),
    pytest.param(
        "[Global]\nzone = a\nports = 80\nports = http\n",
        'cloud.conf:4: section "Global": key "ports": invalid int \'http\'',
        id="bad-list-item",
    ),
    pytest.param(
        "[Global]\nzone\n",
        'cloud.conf:2: section "Global": key "zone": needs a value '
        "(only bool keys may be written bare)",
        id="bare-non-bool",
    ),
    pytest.param(
        "[Global]\nzone = a\ncolour = red\n",
        'cloud.conf:3: section "Global": key "colour": unknown key',
        id="unknown-key",
    ),
    pytest.param(
        "[Global]\nzone = a\n[Nope]\n",
        'cloud.conf:3: section "Nope": unknown section',
        id="unknown-section",
    ),
    pytest.param(
        "[Global]\nzone = a\n[LoadBalancer]\n",
        'cloud.conf:3: section "LoadBalancer": needs a name, as in [LoadBalancer "name"]',
        id="missing-subsection",
    ),
    pytest.param(
        '[Global "x"]\nzone = a\n',
        'cloud.conf:1: section "Global" subsection "x": takes no subsection name',
        id="unexpected-subsection",
    ),
    pytest.param(
        "[Global]\nretries = 1\n",
        'cloud.conf:1: section "Global": key "zone": required key is not set',
        id="required-key-missing",
    ),
    pytest.param(
        '[LoadBalancer "x"]\nscheme = a\n',
        'cloud.conf: section "global": key "zone": '
        "required key is not set (the section is missing)",
        id="required-section-missing",
    ),
    pytest.param(
        "[Global]\nzone = a\\",
        'cloud.conf:2: syntax error in section "Global": '
        'invalid escape end of file in value of "zone"',
        id="backslash-at-end-of-file",
    ),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_configs_are_reported_exactly(text: str, message: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        load(text)
    assert caught.value.issues == [message]


def test_all_errors_are_reported_at_once_in_file_order() -> None:
    with pytest.raises(CloudConfigError) as caught:
        load("[Global]\nretries = x\ndebug = 2\n[Nope]\nzone: a\n[LoadBalancer]\n")
    assert str(caught.value) == "\n".join(
        [
            "5 errors in cloud config:",
            '  cloud.conf:2: section "Global": key "retries": invalid int \'x\'',
            '  cloud.conf:3: section "Global": key "debug": invalid bool (use true/false, '
            "yes/no, on/off or 1/0) '2'",
            '  cloud.conf:4: section "Nope": unknown section',
            '  cloud.conf:5: syntax error in section "Nope": expected "=" after variable "zone"',
            '  cloud.conf:6: section "LoadBalancer": needs a name, as in [LoadBalancer "name"]',
        ]
    )


def test_missing_required_keys_are_reported_with_value_errors() -> None:
    with pytest.raises(CloudConfigError) as caught:
        load("[Global]\nretries = x\n")
    assert caught.value.issues == [
        'cloud.conf:1: section "Global": key "zone": required key is not set',
        'cloud.conf:2: section "Global": key "retries": invalid int \'x\'',
    ]


def test_unsupported_schema_types_fail_loudly() -> None:
    with pytest.raises(TypeError, match="unsupported type"):
        load_cloud_config("", BadConfig)


def test_subsection_names_may_hold_comment_characters_and_escaped_quotes() -> None:
    parsed = parse_gcfg('[LoadBalancer "x;#\\"y\\\\"] ; comment\n', "f")
    assert parsed.sections == (("LoadBalancer", 'x;#"y\\', 1),)


# -- provider-defined value types: setting(parse=...) -------------------------------------------


@dataclass(frozen=True)
class Machine:
    name: str
    ip: str


def parse_machine(text: str) -> Machine:
    name, sep, ip = text.partition("=")
    if not sep or not name.strip() or not ip.strip():
        raise ValueError('expected "name=ip"')
    return Machine(name.strip(), ip.strip())


@dataclass(frozen=True)
class Fleet:
    machines: list[Machine] = setting(default_factory=list, parse=parse_machine)
    gateway: Machine | None = setting(default=None, parse=parse_machine)
    token: Machine | None = setting(default=None, parse=parse_machine, secret=True)


@dataclass(frozen=True)
class FleetConfig:
    global_: Fleet = setting(default_factory=Fleet)


def test_parse_converts_every_value_of_a_list_and_a_single_key() -> None:
    config = load_cloud_config(
        "[Global]\nmachines = a=10.0.0.1\nmachines = b = 10.0.0.2\ngateway = gw=10.0.0.254\n",
        FleetConfig,
    )
    assert config.global_.machines == [Machine("a", "10.0.0.1"), Machine("b", "10.0.0.2")]
    assert config.global_.gateway == Machine("gw", "10.0.0.254")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "[Global]\nmachines = node-a\n",
            'cloud.conf:2: section "Global": key "machines": expected "name=ip" \'node-a\'',
            id="list-item-names-file-line-key-and-value",
        ),
        pytest.param(
            "[Global]\n\ngateway = =1.2.3.4\n",
            'cloud.conf:3: section "Global": key "gateway": expected "name=ip" \'=1.2.3.4\'',
            id="single-value",
        ),
        pytest.param(
            "[Global]\ntoken = hunter2\n",
            'cloud.conf:2: section "Global": key "token": expected "name=ip"',
            id="secret-value-never-shown",
        ),
        pytest.param(
            "[Global]\nmachines\n",
            'cloud.conf:2: section "Global": key "machines": '
            "needs a value (only bool keys may be written bare)",
            id="bare-key",
        ),
    ],
)
def test_parse_errors_read_like_the_built_in_types(text: str, message: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        load_cloud_config(text, FleetConfig, source="cloud.conf")
    assert caught.value.issues == [message]


def test_an_unsupported_type_suggests_parse() -> None:
    with pytest.raises(TypeError, match=r"setting\(parse=\.\.\.\)"):
        load_cloud_config("", BadConfig)
