"""The one article model every reader produces and every pretraining task consumes.

An article is a title, its sections in page order (the first one is the lead section, the
"first section" that BFS and WLP draw queries from; Chang et al. 2020, Sec. 3), and the titles
of the articles it links to (for WLP).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, Tuple


@dataclasses.dataclass(frozen=True)
class Section:
    """One section of an article.

    Args:
      heading: the section heading; "" for the lead section.
      paragraphs: the section's paragraphs as plain text, in order.
    """

    heading: str
    paragraphs: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Article:
    """A Wikipedia-like article.

    Args:
      title: the article's title, human-readable (URL-decoded, underscores as spaces).
      sections: the sections in page order; ``sections[0]`` is the lead section.
      links: titles of the articles this one links to, deduplicated, in first-seen order.
    """

    title: str
    sections: Tuple[Section, ...]
    links: Tuple[str, ...] = ()

    @property
    def lead(self) -> Section | None:
        """The lead ("first") section, or None for an article with no sections."""
        return self.sections[0] if self.sections else None

    @property
    def paragraphs(self) -> Tuple[str, ...]:
        """All paragraphs of all sections, in page order."""
        return tuple(p for s in self.sections for p in s.paragraphs)

    def to_json(self) -> dict:
        return {"title": self.title,
                "sections": [{"heading": s.heading, "paragraphs": list(s.paragraphs)}
                             for s in self.sections],
                "links": list(self.links)}

    @classmethod
    def from_json(cls, obj: dict) -> "Article":
        return cls(title=obj["title"],
                   sections=tuple(Section(s.get("heading", ""), tuple(s["paragraphs"]))
                                  for s in obj["sections"]),
                   links=tuple(obj.get("links", ())))


class ReadReport:
    """Counts what a reader kept and skipped, by reason, for the statistics report.

    Readers call ``report.skip(reason)`` for every input they drop (a redirect, an empty article,
    a broken file) and ``report.keep()`` for every article they yield.
    """

    def __init__(self):
        self.kept = 0
        self.skipped: Dict[str, int] = collections.Counter()

    def keep(self) -> None:
        self.kept += 1

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def as_dict(self) -> dict:
        return {"kept": self.kept, "skipped": dict(sorted(self.skipped.items()))}

    def __repr__(self):
        return f"ReadReport(kept={self.kept}, skipped={dict(self.skipped)})"
