#!/usr/bin/env python3
"""Compares the speaker changes that `gst-launch-1.0 -m` printed in two runs (the GPU check's
element phase, issue 36 §4): each element of OTHER against the one element of REFERENCE.

  compare_changes.py REFERENCE.log OTHER.log [--seconds 0.034]

A change is a `speaker-change` element message: its element, `timestamp` (ns) and `speaker`.
Prints one line per element of OTHER: changes, the largest time difference to the reference's
change at the same place, and whether the speakers agree; exits 1 where the counts differ, a
time differs by more than --seconds (default two frames of segmentation-3.0, 34 ms) or a speaker
differs, 2 where a log holds no change. Standard library only: it runs on the GPU image's Python.
"""
import argparse
import collections
import re
import sys

MESSAGE = re.compile(r'from element "([^"]+)" \(element\): speaker-change, (.*)$')
FIELD = re.compile(r'(?:^|, )(timestamp|speaker)=\((?:guint64|string)\)("(?:[^"\\]|\\.)*"|[^,]*)')


def changes(path):
    """{element: [(seconds, speaker)]} in the order printed."""
    out = collections.defaultdict(list)
    with open(path, errors="replace") as f:
        for line in f:
            m = MESSAGE.search(line)
            if not m:
                continue
            fields = dict(FIELD.findall(m.group(2)))
            out[m.group(1)].append((int(fields["timestamp"]) / 1e9,
                                    fields.get("speaker", "").strip('"')))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference")
    ap.add_argument("other")
    ap.add_argument("--seconds", type=float, default=0.034)
    a = ap.parse_args()
    ref, other = changes(a.reference), changes(a.other)
    if len(ref) != 1 or not other:
        print(f"compare_changes: {len(ref)} elements with changes in {a.reference}, "
              f"{len(other)} in {a.other}")
        return 2
    (ref_name, expected), = ref.items()
    ok = True
    for name, got in sorted(other.items()):
        worst = max((abs(g[0] - e[0]) for g, e in zip(got, expected)), default=0.0)
        speakers = sum(g[1] != e[1] for g, e in zip(got, expected))
        same = len(got) == len(expected) and worst <= a.seconds and speakers == 0
        ok = ok and same
        print(f"{name}: {len(got)} changes against {ref_name}'s {len(expected)}, largest time "
              f"difference {worst * 1000:.1f} ms, {speakers} with another speaker: "
              + ("OK" if same else "DIFFER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
