// Command gostrconv prints Go's own answers for a table of inputs to strconv.ParseBool,
// strconv.FormatBool, strconv.ParseInt (bases 10 and 0), strconv.Quote, time.ParseDuration and
// time.Duration.String(), as a Python module that tests/unit/util/test_gostrconv.py compares
// kccm.util.gostrconv with. Regenerate with:
//
//	(cd hack/gostrconv && go run .) > tests/unit/util/go_strconv_table.py
//	.venv/bin/ruff format tests/unit/util/go_strconv_table.py
package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"
)

var bools = []string{
	"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False",
	"", "tRUE", "TrUe", "truE", "FaLsE", "yes", "no", "on", "off", "y", "n", "2", "-1",
	" true", "true ", "maybe",
}

var ints = []string{
	"0", "1", "-1", "+1", "42", "007", "-0", "017", "08",
	"9223372036854775807", "-9223372036854775808", "9223372036854775808",
	"-9223372036854775809", "99999999999999999999", "-99999999999999999999",
	"", " 1", "1 ", "+", "-", "--1", "+-1", "abc", "1.0", "1e3", "١",
	"1_000", "0_1", "1__0", "_1", "1_", "0x10", "0X_1F", "0o17", "0b101", "0x", "0b2",
}

var durations = []string{
	"0", "+0", "-0", "0s", "00s", "0.0s", "5s", "30s", "1478s", "-5s", "+5s", "5.0s",
	"5.6s", "5.s", ".5s", "1.004s", "1.0040s", "100.00100s", "1ns", "1.1ns", "2.2ns",
	"1us", "1.1us", "1µs", "1μs", "1ms", "300ms", "-1.5h", "2h45m", "10m", "1h",
	"3h30m10.5s", "10.5s4m", "1m1h", "-2m3.4s", "1h2m3s4ms5us6ns", "39h9m14.425s",
	"52763797000ns", "0.3333333333333333333h", "9007199254740993ns",
	"9223372036854775807ns", "9223372036854775.807us", "9223372036854s775ms807us",
	"-9223372036854775808ns", "-9223372036854775.808us", "0.100000000000000000000h",
	"0.830103483285477580700h", "9223372036854775807.9999999999999ns",
	"9223372036854775808ns", "9223372036854775.808us", "-9223372036854775809ns",
	"3000000h", "99999999999999999999s", "99999999999999999999x", "00000000000000000000000001s",
	"", "3", "1.5", "5us5", "-", "+", "s", ".", "-.", ".s", "+.s", "1d", "1.5d", "1x",
	"5 s", " 5s", "5s ", "1S", "1MS", "1sec", "1h-1m", "1e3s", "1_0s", "µs", "1é",
	"5\"s", "1\ts", "1\\s",
}

var durationStrings = []int64{
	0, 1, 2, 999, 1000, 1001, 1100, 1999, 2200, 999999, 1000000, 1500000, 1500001,
	300000000, 999999999, 1000000000, 1000000001, 1500000000, 59000000000, 60000000000,
	61500000000, 3600000000000, 3661000000000, 4000000000000, 9900000000000,
	100000000000000, -1, -1000, -1500000000, -3661000000000,
	9223372036854775807, -9223372036854775808,
}

var quotes = []string{
	"", "maybe", "a\"b", "a\\b", "\t", "\n", "\x01", "\x7f", "é", "µs", "١", "\u200b",
	"\U0001F600", "\U000E0001",
}

// py renders a Go string as a Python string literal; invisible runes are escaped.
func py(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x80 && (r < ' ' || r == 0x7f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func pyErr(err error) string {
	if err == nil {
		return "None"
	}
	return py(err.Error())
}

func main() {
	fmt.Printf("\"\"\"Go's own answers, produced by hack/gostrconv with %s; do not edit by hand.\n\n", runtime.Version())
	fmt.Println("Regenerate: (cd hack/gostrconv && go run .) > tests/unit/util/go_strconv_table.py,")
	fmt.Println("then ruff format that file.")
	fmt.Println("Each row: (input, result or None, Go's error text or None).\"\"\"")
	fmt.Println()
	fmt.Println("# ruff: noqa: RUF001")
	fmt.Println()
	fmt.Println("PARSE_BOOL = [")
	for _, s := range bools {
		v, err := strconv.ParseBool(s)
		out := "None"
		if err == nil {
			out = map[bool]string{true: "True", false: "False"}[v]
		}
		fmt.Printf("    (%s, %s, %s),\n", py(s), out, pyErr(err))
	}
	fmt.Println("]")
	fmt.Printf("FORMAT_BOOL = [(True, %s), (False, %s)]\n", py(strconv.FormatBool(true)), py(strconv.FormatBool(false)))
	for _, base := range []int{10, 0} {
		fmt.Printf("PARSE_INT_BASE_%d = [\n", base)
		for _, s := range ints {
			v, err := strconv.ParseInt(s, base, 64)
			out := "None"
			if err == nil {
				out = strconv.FormatInt(v, 10)
			}
			fmt.Printf("    (%s, %s, %s),\n", py(s), out, pyErr(err))
		}
		fmt.Println("]")
	}
	fmt.Println("PARSE_DURATION_NS = [")
	for _, s := range durations {
		d, err := time.ParseDuration(s)
		out := "None"
		if err == nil {
			out = strconv.FormatInt(int64(d), 10)
		}
		fmt.Printf("    (%s, %s, %s),\n", py(s), out, pyErr(err))
	}
	fmt.Println("]")
	fmt.Println("DURATION_STRING = [")
	for _, n := range durationStrings {
		fmt.Printf("    (%d, %s),\n", n, py(time.Duration(n).String()))
	}
	fmt.Println("]")
	fmt.Println("QUOTE = [")
	for _, s := range quotes {
		fmt.Printf("    (%s, %s),\n", py(s), py(strconv.Quote(s)))
	}
	fmt.Println("]")
}
