"""Print a pregather-overhead report with its measured CPU times blanked.

The report's CPU table (ns per request, ns per dispatch call, the ratio to
CFQ) is timed on the machine that runs it; everything else is simulated and
must be byte-identical between two builds. Used by identical-outputs.sh.
JSON reports keep the table with those columns emptied (and lose
`data.cpu_ns_per_request`); text (stdout) loses the table's rows.
"""

import json
import sys

TIMED = ("ns / request", "ns / dispatch call", "vs CFQ")


def main(path: str) -> None:
    text = open(path, encoding="utf-8").read()
    try:
        report = json.loads(text)
    except json.JSONDecodeError:
        skipping = False
        for line in text.splitlines():
            if line.startswith("CPU:"):
                skipping = True
            elif skipping and not line.strip():
                skipping = False
            if not skipping:
                print(line)
        return
    for table in report.get("tables", []):
        timed = [i for i, c in enumerate(table["columns"]) if c in TIMED]
        for row in table["rows"]:
            for i in timed:
                row[i] = ""
    report.get("data", {}).pop("cpu_ns_per_request", None)
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
