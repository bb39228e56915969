"""Every relative link and #anchor in the project's Markdown resolves, and the README's figures agree with
the reference they link to.

Docs are a reference only if their links land; this walks README.md, BENCHMARKS.md,
RELIABILITY.md and docs/*.md, and checks each relative target file exists and each
#anchor names a heading of the target (GitHub's slug rules). A README paragraph that quotes a
figure (a number with its unit, or a decimal beside a link to the reference) must link to the
section of BENCHMARKS.md or RELIABILITY.md that holds it, and that section must state the same
number, so the README cannot drift from the reference."""
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


REFERENCES = ("BENCHMARKS.md", "RELIABILITY.md")
FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?) ?(?:ms|FPS|dB|MiB|GiB|MB|GB|%|minutes)(?!\w)")
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def _heading(line):
    m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
    return (len(m.group(1)), _slug(m.group(2))) if m else None


def _section(path, anchor):
    """The text under the heading `anchor` names, down to the next heading of its level or above."""
    lines, level, seen = [], None, {}
    for line in _prose(path):
        h = _heading(line)
        if h:
            n = seen.get(h[1], 0)
            seen[h[1]] = n + 1
            slug = h[1] if n == 0 else f"{h[1]}-{n}"
            if level is not None and h[0] <= level:
                break
            if level is None and slug == anchor:
                level = h[0]
        if level is not None:
            lines.append(line)
    return "\n".join(lines)


def _paragraphs(path):
    para = []
    for line in list(_prose(path)) + [""]:
        if line.strip():
            para.append(line)
        elif para:
            yield " ".join(para)
            para = []


def readme_figures_off_the_reference():
    """README paragraphs whose figures have no anchored link, or differ from the linked section."""
    bad = []
    for para in _paragraphs(ROOT / "README.md"):
        links = [t for t in LINK.findall(para) if t.partition("#")[0] in REFERENCES]
        figures = {m.group(1) for m in FIGURE.finditer(para)}
        if links:
            figures |= set(DECIMAL.findall(para))
        if not figures:
            continue
        where = f"README.md: \"{para[:60]}...\""
        if not links:
            bad.append(f"{where} quotes {sorted(figures)} with no link to {' or '.join(REFERENCES)}")
            continue
        text = ""
        for target in links:
            file_part, _, anchor = target.partition("#")
            if not anchor:
                bad.append(f"{where} links {target} without the #section that holds its figures")
                continue
            text += _section(ROOT / file_part, anchor.lower()) + "\n"
        for figure in sorted(figures):
            if not re.search(rf"(?<![\w.]){re.escape(figure)}(?![\w.])", text):
                bad.append(f"{where} quotes {figure}, which its linked sections do not state")
    return bad


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


def test_every_readme_figure_links_to_the_section_that_states_it():
    assert readme_figures_off_the_reference() == []


if __name__ == "__main__":
    print("\n".join(broken_links() + readme_figures_off_the_reference()) or "all links resolve, README figures agree")
