#!/usr/bin/python3
"""Writes py_text_tables.cpp: the character tables behind py_text.cpp.

Run from the repository root with the Python whose `str` the backend uses:
    /usr/bin/python3 admission/template/jinja/gen_py_text_tables.py

Every value is read from Python's own `str` methods, not from the Unicode
data files, so the tables say what this Python does. CPython exposes two of
its flags (cased, case-ignorable) only through case mapping, so they are
probed the way str.title() and str.lower() consult them; the probes are
cross-checked against the Unicode definitions where unicodedata has them.
"""

import os
import sys
import unicodedata

MAX_CODE_POINT = 0x10FFFF

# Must match the flag names in py_text_tables.hpp.
FLAGS = [
    "kSpace",
    "kPrintable",
    "kAlpha",
    "kDecimal",
    "kDigit",
    "kNumeric",
    "kUpper",
    "kLower",
    "kTitle",
    "kCased",
    "kCaseIgnorable",
    "kLineBreak",
]
BIT = {name: 1 << i for i, name in enumerate(FLAGS)}


def is_surrogate(cp):
    return 0xD800 <= cp <= 0xDFFF


def probe_cased(ch):
    # str.title() lowercases a letter after a cased character and titlecases
    # it after an uncased one.
    return (ch + "a").title()[-1] == "a"


def probe_case_ignorable(ch, cased):
    # str.lower() maps U+03A3 to final sigma when a cased letter precedes it
    # and none follows, skipping case-ignorable characters either way.
    if cased:
        return ("A\u03a3" + ch).lower()[1] == "\u03c2"
    return ("A" + ch + "\u03a3").lower()[-1] == "\u03c2"


def flags_of(cp):
    ch = chr(cp)
    flags = 0
    if ch.isspace():
        flags |= BIT["kSpace"]
    if ch.isprintable():
        flags |= BIT["kPrintable"]
    if ch.isalpha():
        flags |= BIT["kAlpha"]
    if ch.isdecimal():
        flags |= BIT["kDecimal"]
    if ch.isdigit():
        flags |= BIT["kDigit"]
    if ch.isnumeric():
        flags |= BIT["kNumeric"]
    if ch.isupper():
        flags |= BIT["kUpper"]
    if ch.islower():
        flags |= BIT["kLower"]
    title = unicodedata.category(ch) == "Lt"
    # For one character, istitle() is "titlecase or uppercase".
    assert ch.istitle() == (title or ch.isupper()), hex(cp)
    if title:
        flags |= BIT["kTitle"]
    cased = probe_cased(ch)
    assert cased == (ch.isupper() or ch.islower() or title), hex(cp)
    if cased:
        flags |= BIT["kCased"]
    if probe_case_ignorable(ch, cased):
        flags |= BIT["kCaseIgnorable"]
    if len(("a" + ch + "b").splitlines()) == 2:
        flags |= BIT["kLineBreak"]
    return flags


def flag_expr(flags):
    names = [name for name in FLAGS if flags & BIT[name]]
    return " | ".join(names) if names else "0"


def property_ranges():
    ranges = []  # (first, flags); each holds up to the next one's first
    latin1 = []
    previous = None
    for cp in range(MAX_CODE_POINT + 1):
        flags = 0 if is_surrogate(cp) else flags_of(cp)
        if cp < 256:
            latin1.append(flags)
        if flags != previous:
            ranges.append((cp, flags))
            previous = flags
    return ranges, latin1


def case_mappings(method):
    """Splits str.<method> per code point into single-character deltas and
    multi-character mappings."""
    singles = []  # (cp, delta)
    multis = []  # (cp, mapped)
    for cp in range(MAX_CODE_POINT + 1):
        if is_surrogate(cp):
            continue
        mapped = getattr(chr(cp), method)()
        if mapped == chr(cp):
            continue
        assert 1 <= len(mapped) <= 3, hex(cp)
        if len(mapped) == 1:
            singles.append((cp, ord(mapped) - cp))
        else:
            multis.append((cp, mapped))
    return singles, multis


def delta_runs(singles):
    """Packs (cp, delta) pairs into runs first, first + stride, ..., last
    sharing one delta. Stride 2 covers the alternating upper/lower blocks.
    A run never spans a code point of another run, so the runs' intervals
    are disjoint and one binary search finds the only candidate."""
    mapped = {cp for cp, _ in singles}
    runs = []
    i = 0
    while i < len(singles):
        first, delta = singles[i]
        last, stride = first, 1
        j = i + 1
        if j < len(singles) and singles[j][1] == delta and singles[j][0] - first in (1, 2):
            stride = singles[j][0] - first
            while (
                j < len(singles)
                and singles[j][1] == delta
                and singles[j][0] - last == stride
                and (stride == 1 or last + 1 not in mapped)
            ):
                last = singles[j][0]
                j += 1
        runs.append((first, last, stride, delta))
        i = j
    for before, after in zip(runs, runs[1:]):
        assert before[1] < after[0]
    return runs


def title_overrides():
    """Where str.title() of one character differs from str.upper(): the
    titlecase digraphs, Georgian Mkhedruli (no titlecase form) and the
    multi-character mappings whose tail stays lowercase."""
    overrides = []
    for cp in range(MAX_CODE_POINT + 1):
        if is_surrogate(cp):
            continue
        ch = chr(cp)
        title = ch.title()
        if title != ch.upper():
            assert 1 <= len(title) <= 3, hex(cp)
            overrides.append((cp, title))
    return overrides


def cp_list(text):
    return "{" + ", ".join("0x%04X" % ord(c) for c in text) + "}"


def emit_runs(out, name, runs):
    out.append("extern const CaseRun %s[] = {" % name)
    for first, last, stride, delta in runs:
        out.append("    {0x%04X, 0x%04X, %d, %d}," % (first, last, stride, delta))
    out.append("};")
    out.append("extern const std::size_t %sCount = std::size(%s);" % (name, name))
    out.append("")


def emit_multis(out, name, multis):
    out.append("extern const MultiCase %s[] = {" % name)
    for cp, mapped in multis:
        out.append("    {0x%04X, %s}," % (cp, cp_list(mapped)))
    out.append("};")
    out.append("extern const std::size_t %sCount = std::size(%s);" % (name, name))
    out.append("")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "py_text_tables.cpp")

    ranges, latin1 = property_ranges()
    upper_singles, upper_multis = case_mappings("upper")
    lower_singles, lower_multis = case_mappings("lower")
    overrides = title_overrides()

    out = [
        "// GENERATED by admission/template/jinja/gen_py_text_tables.py; do not edit.",
        "// Source: Python %s, unicodedata.unidata_version %s."
        % (sys.version.split()[0], unicodedata.unidata_version),
        "// Regenerate from the repository root:",
        "//     /usr/bin/python3 admission/template/jinja/gen_py_text_tables.py",
        "// One entry a line keeps regenerations reviewable as diffs.",
        "// clang-format off",
        '#include "admission/template/jinja/py_text_tables.hpp"',
        "",
        "#include <iterator>",
        "",
        "namespace dpgate::admission::jinja::py_text_tables {",
        "",
        'extern const char kUnicodeVersion[] = "%s";' % unicodedata.unidata_version,
        "",
        "extern const std::uint16_t kLatin1Flags[256] = {",
    ]
    for flags in latin1:
        out.append("    %s," % flag_expr(flags))
    out.append("};")
    out.append("")
    out.append("extern const PropertyRange kPropertyRanges[] = {")
    for first, flags in ranges:
        out.append("    {0x%04X, %s}," % (first, flag_expr(flags)))
    out.append("};")
    out.append("extern const std::size_t kPropertyRangesCount = std::size(kPropertyRanges);")
    out.append("")
    emit_runs(out, "kUpperRuns", delta_runs(upper_singles))
    emit_multis(out, "kUpperMulti", upper_multis)
    emit_runs(out, "kLowerRuns", delta_runs(lower_singles))
    emit_multis(out, "kLowerMulti", lower_multis)
    emit_multis(out, "kTitleOverrides", overrides)
    out.append("}  // namespace dpgate::admission::jinja::py_text_tables")
    out.append("// clang-format on")

    with open(target, "w", encoding="ascii") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
