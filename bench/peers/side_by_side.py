#!/usr/bin/env python3
"""Decode step time of tpserve (bench/tp_decode --json) and of a peer (bench/peers/transformers_decode.py
--json) side by side, per concurrency, with the ratio peer / tpserve. Standard library only.

    python3 bench/peers/side_by_side.py tp_decode.json peer.json [--arm NAME] [--json compare.json]
"""

import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def tpserve_steps(record, arm):
    """{concurrency: decode_step_ms distribution} of one tp_decode arm (the first when not named)."""
    summary = record.get("summary") or []
    arms = [s.get("arm") for s in summary]
    if not summary:
        raise SystemExit("tp_decode JSON has no summary")
    arm = arm or arms[0]
    if arm not in arms:
        raise SystemExit(f"tp_decode JSON has no arm '{arm}' (arms: {', '.join(sorted(set(arms)))})")
    return {s["concurrency"]: s.get("decode_step_ms") for s in summary if s.get("arm") == arm}, arm


def peer_steps(record):
    """{concurrency: best result} of the peer (the fastest experts backend per concurrency)."""
    return {int(c): r for c, r in (record.get("best") or {}).items()}


def fmt(value, decimals=2):
    return "n/a" if value is None else f"{value:.{decimals}f}"


def spread(d):
    return "n/a" if d.get("median") is None else f"{fmt(d['median'])} ({fmt(d['p10'])}-{fmt(d['p90'])})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tp_decode_json")
    p.add_argument("peer_json")
    p.add_argument("--arm", default=None, help="tp_decode arm (default: the first)")
    p.add_argument("--json", default=None, help="write the comparison as JSON")
    args = p.parse_args()
    tp, arm = tpserve_steps(load(args.tp_decode_json), args.arm)
    peer_record = load(args.peer_json)
    peer = peer_steps(peer_record)
    versions = peer_record.get("versions", {})

    rows = []
    for c in sorted(set(tp) | set(peer)):
        t = tp.get(c) or {}
        r = peer.get(c) or {}
        s = r.get("step_ms") or {}
        ratio = s["median"] / t["median"] if s.get("median") and t.get("median") else None
        rows.append({"concurrency": c,
                     "tpserve_step_ms": {k: t.get(k) for k in ("median", "p10", "p90")},
                     "peer_step_ms": {k: s.get(k) for k in ("median", "p10", "p90")},
                     "peer_over_tpserve": ratio,
                     "peer_experts": r.get("experts"),
                     "peer_execution": r.get("execution")})

    print(f"decode step time, ms (median, p10-p90): tpserve arm '{arm}' vs transformers "
          f"{versions.get('transformers', '?')} (torch {versions.get('torch', '?')})")
    print(f"{'conc':>5} {'tpserve':>24} {'transformers':>24} {'peer/tpserve':>13}  peer experts / execution")
    for row in rows:
        t, s = row["tpserve_step_ms"], row["peer_step_ms"]
        ratio = "n/a" if row["peer_over_tpserve"] is None else fmt(row["peer_over_tpserve"]) + "x"
        peer = f"{row['peer_experts']} / {row['peer_execution']}" if row["peer_execution"] else "no result"
        print(f"{row['concurrency']:>5} {spread(t):>24} {spread(s):>24} {ratio:>13}  {peer}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "side_by_side", "tp_decode_json": args.tp_decode_json, "peer_json": args.peer_json,
                       "arm": arm, "peer_versions": versions, "rows": rows}, f, indent=1)
            f.write("\n")
    complete = all(row["peer_over_tpserve"] is not None for row in rows)
    return 0 if rows and complete else 1


if __name__ == "__main__":
    sys.exit(main())
