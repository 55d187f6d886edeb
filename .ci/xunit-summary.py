#!/usr/bin/env python3
"""Reads the xUnit report of `swift test --parallel --xunit-output` (its argument): prints to stderr the
totals, every failed test and the ten test classes that took longest (where CI's time goes), and to
stdout the number of tests that passed. Exits 1 when a test failed, errored, or none ran."""
import collections
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
cases = root.iter("testcase")
passed, failed = 0, []
per_class = collections.Counter()
for case in cases:
    name = f"{case.get('classname')}.{case.get('name')}"
    per_class[case.get("classname")] += float(case.get("time") or 0)
    if case.find("failure") is not None or case.find("error") is not None:
        failed.append(name)
    elif case.find("skipped") is None:
        passed += 1
total = sum(per_class.values())
print(f"swift test: {passed} passed, {len(failed)} failed; {total:.0f} s of test time in "
      f"{len(per_class)} classes", file=sys.stderr)
for name in failed:
    print(f"  failed: {name}", file=sys.stderr)
print("  slowest classes: " + ", ".join(f"{c} {t:.0f} s" for c, t in per_class.most_common(10)),
      file=sys.stderr)
print(passed)
sys.exit(1 if failed or passed == 0 else 0)
