"""kccm.util.labelselector against apimachinery's ``labels.Parse`` rules (selector_test.go's
TestSelectorParse, TestSelectorMatches, TestLexer in spirit): what parses, what does not and
why, and what each requirement matches."""

from __future__ import annotations

import pytest

from kccm.util.labelselector import Requirement, SelectorError, parse


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        pytest.param("", [], id="empty-is-everything"),
        pytest.param("  ", [], id="blank-is-everything"),
        pytest.param("a", [("a", "exists", ())], id="exists"),
        pytest.param("!a", [("a", "!exists", ())], id="does-not-exist"),
        pytest.param(" ! a ", [("a", "!exists", ())], id="does-not-exist-with-spaces"),
        pytest.param("a=b", [("a", "=", ("b",))], id="equals"),
        pytest.param("a==b", [("a", "==", ("b",))], id="double-equals"),
        pytest.param("a!=b", [("a", "!=", ("b",))], id="not-equals"),
        pytest.param("a=", [("a", "=", ("",))], id="equals-empty-value"),
        pytest.param("a=,b", [("a", "=", ("",)), ("b", "exists", ())], id="empty-value-then-more"),
        pytest.param("a in (x,y)", [("a", "in", ("x", "y"))], id="in"),
        pytest.param("a notin (x)", [("a", "notin", ("x",))], id="notin"),
        pytest.param("a in (x,)", [("a", "in", ("x", ""))], id="in-trailing-comma-is-empty"),
        pytest.param("a in (,x)", [("a", "in", ("", "x"))], id="in-leading-comma-is-empty"),
        pytest.param("a>3", [("a", ">", ("3",))], id="greater-than"),
        pytest.param("a < 2", [("a", "<", ("2",))], id="less-than-with-spaces"),
        pytest.param(
            "a=b,c!=d,e in (x,y),!f",
            [
                ("a", "=", ("b",)),
                ("c", "!=", ("d",)),
                ("e", "in", ("x", "y")),
                ("f", "!exists", ()),
            ],
            id="the-issue-example",
        ),
        pytest.param(
            "example.com/pool=web , kubernetes.io/os in (linux)",
            [("example.com/pool", "=", ("web",)), ("kubernetes.io/os", "in", ("linux",))],
            id="prefixed-keys-and-spaces",
        ),
        pytest.param("in=notin", [("in", "=", ("notin",))], id="keywords-as-key-and-value"),
    ],
)
def test_parses(text: str, requirements: list[tuple[str, str, tuple[str, ...]]]) -> None:
    got = parse(text).requirements
    assert [(r.key, r.operator, r.values) for r in got] == requirements


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("a=b=c", "found '=', expected: ',' or end of string", id="two-equals"),
        pytest.param("a b", "found 'b' after key 'a', expected:", id="no-operator"),
        pytest.param("a in x", "found 'x', expected: '('", id="in-without-parenthesis"),
        pytest.param("a in ()", "'in' needs at least one value", id="in-empty-set"),
        pytest.param("a in (x", "found end of string, expected: ',' or ')'", id="unclosed-set"),
        pytest.param("a,", "found end of string, expected: a key after ','", id="trailing-comma"),
        pytest.param(",a", "found ',', expected: !, a key or end of string", id="leading-comma"),
        pytest.param("a=(b)", "found '(', expected: a value", id="set-after-equals"),
        pytest.param(
            "!a=b", "found '=', expected: ',' or end of string", id="not-exists-with-value"
        ),
        pytest.param("a>b", "'>' needs an integer, not 'b'", id="greater-than-a-word"),
        pytest.param("-a=b", "invalid key '-a'", id="key-starts-with-dash"),
        pytest.param("a<-2", "invalid value '-2'", id="negative-bound-is-no-label-value"),
        pytest.param("Ex.com/a=b", "the prefix must be a DNS subdomain", id="uppercase-prefix"),
        pytest.param("/a=b", "the prefix must be a DNS subdomain", id="empty-prefix"),
        pytest.param("a=" + "v" * 64, "invalid value", id="value-over-63"),
        pytest.param("k" * 64, "invalid key", id="name-over-63"),
        pytest.param("a=b_", "invalid value 'b_'", id="value-ends-with-underscore"),
        pytest.param("!", "found end of string, expected: a key", id="bang-alone"),
    ],
)
def test_refuses(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as raised:
        parse(text)
    assert message in str(raised.value)


LABELS = {"a": "b", "n": "5", "word": "x", "empty": ""}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        pytest.param("", True, id="empty-matches-all"),
        pytest.param("a", True, id="exists"),
        pytest.param("z", False, id="exists-missing"),
        pytest.param("!z", True, id="not-exists"),
        pytest.param("!a", False, id="not-exists-present"),
        pytest.param("a=b", True, id="equals"),
        pytest.param("a=c", False, id="equals-other"),
        pytest.param("z=", False, id="equals-empty-needs-the-label"),
        pytest.param("empty=", True, id="equals-empty-value"),
        pytest.param("a!=c", True, id="not-equals"),
        pytest.param("z!=c", True, id="not-equals-missing-label-matches"),
        pytest.param("a!=b", False, id="not-equals-same"),
        pytest.param("a in (c,b)", True, id="in"),
        pytest.param("z in (c,b)", False, id="in-missing"),
        pytest.param("a notin (b)", False, id="notin-member"),
        pytest.param("z notin (b)", True, id="notin-missing-label-matches"),
        pytest.param("n>4", True, id="gt"),
        pytest.param("n>5", False, id="gt-equal"),
        pytest.param("n<6", True, id="lt"),
        pytest.param("word>1", False, id="gt-non-integer-label"),
        pytest.param("z<1", False, id="lt-missing"),
        pytest.param("a=b,n>4,!z", True, id="all-must-match"),
        pytest.param("a=b,n>9", False, id="one-fails"),
    ],
)
def test_matches(text: str, matches: bool) -> None:
    assert parse(text).matches(LABELS) is matches


def test_no_labels_at_all() -> None:
    assert parse("!a").matches(None)
    assert not parse("a").matches(None)


def test_a_requirement_prints_as_it_parses() -> None:
    text = "a=b,c!=d,e in (x,y),!f,g,n>1"
    assert str(parse(text)) == text
    assert str(Requirement("e", "notin", ("x",))) == "e notin (x)"
