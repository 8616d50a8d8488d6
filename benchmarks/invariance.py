"""The neighbour-invariance table (not a benchmark of speed): every CLI command and Python
mechanism of :mod:`privagg.testing.invariance`, run on D and on D plus each hostile record.

A cell is ``=`` when the exit code, stderr, exception type and warnings are identical (and stdout
holds no raw control character), ``≠`` otherwise (the differences are listed below the table),
``·`` when the record has no in-memory form for that input kind. The same comparisons run in
``make test`` (tests/invariance/); this script prints them as one table for a report.

usage: python benchmarks/invariance.py [--markdown]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from privagg.testing.invariance import HOSTILE_RECORDS, invariance_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="privagg-invariance-") as tmp:
        table = invariance_table(Path(tmp))
    cases = list(dict.fromkeys(row["case"] for row in table))
    cells = {(row["case"], row["record"]): row["differences"] for row in table}
    sep = " | " if args.markdown else "  "
    width = max(len(r.name) for r in HOSTILE_RECORDS)
    first = "record" if args.markdown else "record".ljust(width)
    header = [first] + [f"c{i + 1}".center(3) for i in range(len(cases))]
    print("\n".join(f"c{i + 1}: {name}" for i, name in enumerate(cases)))
    print()
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print(sep.join(header))
    for record in HOSTILE_RECORDS:
        marks = []
        for case in cases:
            diff = cells.get((case, record.name))
            marks.append("·" if diff is None else ("=" if not diff else "≠"))
        name = record.name if args.markdown else record.name.ljust(width)
        line = sep.join([name] + [m.center(3) for m in marks])
        print(("| " + line + " |") if args.markdown else line)
    bad = [(c, r, d) for (c, r), d in cells.items() if d]
    compared = len(cells)
    print(f"\n{compared} comparisons, {compared - len(bad)} equal, {len(bad)} different")
    for case, record, diff in bad:
        print(f"  {case} × {record}: {'; '.join(diff)}")


if __name__ == "__main__":
    main()
