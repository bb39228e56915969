"""`flash inspect`: a weights directory described from its headers, as JSON for a bug report or as text.

Per official file: tensor count, bytes, dtypes, a key tree (indices folded: `blocks.N.attn1.to_q.weight`, with
counts and an example shape), the verdict against this code (loads, or the first missing / unexpected /
shape-mismatched keys), the layout family found, and whether the size agrees with the public model card.
"""

from __future__ import annotations

import re

from renderer.flash.checkpoint import dtype_counts

SHOWN = 8


def key_tree(infos: dict) -> dict:
    """{top-level name: {tensors, bytes, patterns: {folded key: {count, example_shape}}}}."""
    tree: dict[str, dict] = {}
    for key, info in sorted(infos.items()):
        top = key.split(".", 1)[0]
        node = tree.setdefault(top, {"tensors": 0, "bytes": 0, "patterns": {}})
        node["tensors"] += 1
        node["bytes"] += info.nbytes
        folded = re.sub(r"(?<=\.)\d+(?=\.|$)", "N", key)
        leaf = node["patterns"].setdefault(folded, {"count": 0, "example_shape": list(info.shape)})
        leaf["count"] += 1
    return tree


def file_report(check, card_bytes: float | None, tolerance: float) -> dict:
    infos = check.infos
    size = sum(i.nbytes for i in infos.values())
    ratio = size / card_bytes if card_bytes else None          # None: a file of ours, not on the model card
    return {
        "verdict": "loads" if check.ok else "does not load",
        "errors": [str(e) for e in check.errors],
        "missing": check.missing[:SHOWN], "missing_count": len(check.missing),
        "unexpected": check.unexpected[:SHOWN], "unexpected_count": len(check.unexpected),
        "mismatched": check.mismatched[:SHOWN], "mismatched_count": len(check.mismatched),
        "family": check.family, "notes": check.notes,
        "tensors": len(infos), "bytes": size, "dtypes": dtype_counts(infos.values()),
        "card": {"bytes": card_bytes, "ratio": round(ratio, 3) if ratio else None,
                 "agrees": bool(ratio and abs(ratio - 1) <= tolerance)},
        "tree": key_tree(infos),
    }


def _size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def render_text(report: dict) -> str:
    lines = [f"{report['dir']}: {'loads' if report['loads'] else 'DOES NOT LOAD'} "
             f"(config {report['config']['name'] if report['config'] else '?'}, text_sink {report['text_sink']}"
             f"{', mean flow: t and t - r embedded' if report.get('mean_flow') else ''})"]
    if report.get("decoder"):
        lines.append(f"decoder: {report['decoder']}")
    for name, f in report["files"].items():
        card = f["card"]
        on_card = (f"card {_size(card['bytes'])} ({'agrees' if card['agrees'] else 'differs'}"
                   f"{', x' + str(card['ratio']) if card['ratio'] else ''})") if card["bytes"] else "not on the card"
        lines.append(f"\n{name}: {f['verdict']}; {f['tensors']} tensors, {_size(f['bytes'])}, "
                     f"{', '.join(f'{d} x{n}' for d, n in f['dtypes'].items()) or 'no dtypes'}; {on_card}"
                     + (f"; family {f['family']}" if f["family"] else ""))
        for label in ("errors", "notes"):
            lines += [f"  {label[:-1]}: {m}" for m in f[label]]
        for label in ("missing", "unexpected", "mismatched"):
            if f[f"{label}_count"]:
                more = f" (+{f[f'{label}_count'] - len(f[label])} more)" if f[f"{label}_count"] > len(f[label]) else ""
                lines.append(f"  {label}: {', '.join(f[label])}{more}")
        for top, node in f["tree"].items():
            lines.append(f"  {top}: {node['tensors']} tensors, {_size(node['bytes'])}")
            for pattern, leaf in list(node["patterns"].items())[:SHOWN]:
                lines.append(f"    {pattern} x{leaf['count']} {tuple(leaf['example_shape'])}")
            if len(node["patterns"]) > SHOWN:
                lines.append(f"    ... (+{len(node['patterns']) - SHOWN} more patterns)")
    return "\n".join(lines)
