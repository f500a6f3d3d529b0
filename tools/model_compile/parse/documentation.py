"""Find documented fallbacks and intentional config choices.

Two forms count:

* a comment `# model-compile: <kind> - <reason>` on the line, or in the
  three lines above, of the code or YAML key it explains;
* a README section whose heading contains "Compile" and whose text names the
  kind and gives a reason (at least a few words beyond the kind).
"""

from __future__ import annotations

import re

from model_compile.parse.models import Documentation, Suppression
from model_compile.parse.python import mentions_note, source_lines
from model_compile.vocabulary import DocKind, is_doc_kind

COMMENT_RE = re.compile(r"model-compile:\s*(?P<kind>[a-z-]+)\s*(?:[-\u2013\u2014:]+\s*(?P<reason>.*))?$", re.IGNORECASE)
IGNORE_RE = re.compile(
    r"model-compile:\s*ignore\s*\[(?P<rules>[^\]]*)\]\s*(?:[-\u2013\u2014:]+\s*(?P<reason>.*))?$", re.IGNORECASE
)
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# Kind words as people write them in prose.
KIND_WORDS: dict[DocKind, re.Pattern[str]] = {
    "submodule": re.compile(r"\bsub-?modules?\b", re.I),
    "graph-break": re.compile(r"\bgraph[- ]breaks?\b|compiler\.disable", re.I),
    "post-wrap": re.compile(r"\bpost-wrap\b|\bafter (distributed )?wrapping\b", re.I),
    "regional": re.compile(r"\bregional\b|\bper[- ]block\b|\bper[- ]layer\b", re.I),
    "enabled": re.compile(
        r"\b(?:enabled|on) by default\b|\bdefaults? to (?:true|enabled|on)\b|\benabled:\s*true\b", re.I
    ),
}
MIN_REASON_WORDS = 3


def parse_comment(text: str) -> tuple[DocKind, str] | None:
    """(kind, reason) from a comment body, or None."""
    m = COMMENT_RE.search(text)
    if not m:
        return None
    kind = m.group("kind").lower()
    reason = (m.group("reason") or "").strip()
    if not is_doc_kind(kind):
        return None
    return kind, reason


def comment_docs(comments: dict[int, str], path: str) -> list[Documentation]:
    """Every well-formed `# model-compile:` comment in a file."""
    out = []
    for line, body in sorted(comments.items()):
        parsed = parse_comment(body)
        if parsed and parsed[1]:
            reason = parsed[1]
            nxt = line + 1  # a reason continued on the following comment lines
            while nxt in comments and comments[nxt] and parse_comment(comments[nxt]) is None and len(reason) < 300:
                reason += " " + comments[nxt]
                nxt += 1
            out.append(Documentation(kind=parsed[0], reason=reason, file=path, line=line, source="comment"))
    return out


def ignore_comments(comments: dict[int, str], path: str) -> list[Suppression]:
    """Every `# model-compile: ignore[MCxxx, ...] - <reason>` comment in a file (reason may be empty)."""
    out = []
    for line, body in sorted(comments.items()):
        m = IGNORE_RE.search(body)
        if m:
            rules = [r.strip().upper() for r in m.group("rules").split(",") if r.strip()]
            reason = (m.group("reason") or "").strip()
            out.append(Suppression(rules=rules, reason=reason, file=path, line=line))
    return out


_NOT_YAML_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e]")


def yaml_lines(text: str) -> list[str]:
    """The lines of a YAML file as YAML numbers them (its marks, its comments).

    YAML ends a line at `\\n`, `\\r\\n`, `\\r`, NEL, LS and PS; `str.splitlines`
    also breaks at form feeds, vertical tabs and file/group/record separators.
    """
    if _NOT_YAML_BREAKS.search(text) is None:
        return text.splitlines()
    return source_lines(text.replace("\x85", "\n").replace("\u2028", "\n").replace("\u2029", "\n"))


def yaml_comments(text: str) -> dict[int, str]:
    """Line -> comment body for YAML (a '#' outside quotes), of a file that holds a note (else none are read)."""
    out: dict[int, str] = {}
    if not mentions_note(text):
        return out
    for i, raw in enumerate(yaml_lines(text), 1):
        if "#" not in raw:
            continue
        quote = None
        for j, ch in enumerate(raw):
            if quote:
                if ch == quote:
                    quote = None
            elif ch in "'\"":
                quote = ch
            elif ch == "#" and (j == 0 or raw[j - 1] in " \t"):
                out[i] = raw[j + 1 :].strip()
                break
    return out


def documented_at(
    docs: list[Documentation], kind: str, path: str, line: int, comment_only: frozenset[int] | set[int] = frozenset()
) -> Documentation | None:
    """A comment of `kind` on `line` or within the three lines above it.

    Lines that hold only a comment do not count towards the three, so a
    multi-line note directly above the code still documents it.
    """
    low, budget = line, 3
    while budget > 0 and low > 1:
        low -= 1
        if low not in comment_only:
            budget -= 1
    while low - 1 in comment_only:
        low -= 1
    for d in docs:
        if d.source == "comment" and d.kind == kind and d.file == path and low <= d.line <= line:
            return d
    return None


def comment_only_lines(lines: list[str]) -> frozenset[int]:
    """Line numbers holding nothing but a comment (Python or YAML lines, numbered from 1)."""
    return frozenset(i for i, raw in enumerate(lines, 1) if raw.lstrip().startswith("#"))


def readme_docs(text: str, path: str) -> list[Documentation]:
    """Documentation from README sections whose heading mentions Compile."""
    out: list[Documentation] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = HEADING_RE.match(lines[i])
        if not m or "compile" not in m.group(2).lower():
            i += 1
            continue
        level = len(m.group(1))
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            n = HEADING_RE.match(lines[i])
            if n and len(n.group(1)) <= level:
                break
            body.append(lines[i])
            i += 1
        section = " ".join(s.strip() for s in body)
        for kind, word in KIND_WORDS.items():
            hit = word.search(section)
            if not hit:
                continue
            # The reason: the words of the section other than the kind itself.
            rest = word.sub(" ", section)
            words = re.findall(r"[A-Za-z]{2,}", rest)
            if len(words) >= MIN_REASON_WORDS:
                reason = section.strip()
                reason = reason if len(reason) <= 200 else reason[:197] + "..."
                out.append(Documentation(kind=kind, reason=reason, file=path, line=start + 1, source="readme"))
    return out


# A README sentence that keeps the recipe off the kit: a negation a few words before the kit's name.
_KIT_NAME = re.compile(r"\b(?:model[- ])?kits?\b|\w*ModelKit\b", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:not|never|no|without|avoids?|avoiding|bypass(?:es|ing)?|skips?|skipping|instead of|rather than)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
KIT_NEGATION_WORDS = 4  # at most this many words between the negation and the kit's name


def kit_avoidance(text: str) -> tuple[int, str] | None:
    """(line, sentence) of the first README sentence that names the kit a few words after a negation
    ("This recipe intentionally does not use the kit layer"), else None.

    Read per paragraph, so a sentence may span lines; the line is where it starts.
    Code blocks are skipped.
    """
    paragraph: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(source_lines(text) + [""], 1):
        fence = line.lstrip().startswith(("```", "~~~"))
        if fenced:
            fenced = not fence
            continue
        if line.strip() and not fence and not line.lstrip().startswith("#"):
            paragraph.append((number, line.strip()))
            continue
        found = _paragraph_avoidance(paragraph)  # a blank line, a heading or a fence ends the paragraph
        if found is not None:
            return found
        paragraph = []
        fenced = fence
    return None


def _paragraph_avoidance(paragraph: list[tuple[int, str]]) -> tuple[int, str] | None:
    if not paragraph:
        return None
    joined, starts = "", []
    for number, text in paragraph:
        starts.append((len(joined), number))
        joined += text + " "
    offset = 0
    for sentence in _SENTENCE_END.split(joined.strip()):
        at = joined.index(sentence, offset)
        offset = at + len(sentence)
        for kit in _KIT_NAME.finditer(sentence):
            before = sentence[: kit.start()]
            for neg in _NEGATION.finditer(before):
                if len(before[neg.end() :].split()) <= KIT_NEGATION_WORDS:
                    return max(n for start, n in starts if start <= at), sentence.strip()
    return None
