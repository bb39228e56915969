"""Every relative link and #anchor in the project's Markdown resolves.

Docs are a reference only if their links land; this walks README.md, BENCHMARKS.md,
RELIABILITY.md and docs/*.md, and checks each relative target file exists and each
#anchor names a heading of the target (GitHub's slug rules)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def _md_files():
    files = [ROOT / n for n in ("README.md", "BENCHMARKS.md", "RELIABILITY.md")]
    files += sorted((ROOT / "docs").glob("*.md"))
    return [f for f in files if f.exists()]


def _prose(path):
    """Lines outside fenced code blocks (links in code are examples, not links)."""
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            inside = not inside
            continue
        if not inside:
            yield line


def _slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"`", "", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(path):
    seen, out = {}, set()
    for line in _prose(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = _slug(m.group(1))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def broken_links():
    bad, cache = [], {}
    for md in _md_files():
        for line in _prose(md):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # http:, mailto: and the like are not checked here
                file_part, _, anchor = target.partition("#")
                dest = (md.parent / file_part).resolve() if file_part else md
                where = f"{md.relative_to(ROOT)}: {target}"
                if not dest.exists():
                    bad.append(f"{where} (no such file)")
                    continue
                if anchor and dest.suffix == ".md":
                    if dest not in cache:
                        cache[dest] = _anchors(dest)
                    if anchor.lower() not in cache[dest]:
                        bad.append(f"{where} (no such heading)")
    return bad


def test_every_relative_link_and_anchor_resolves():
    assert broken_links() == []


if __name__ == "__main__":
    print("\n".join(broken_links()) or "all links resolve")
