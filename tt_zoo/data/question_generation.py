"""Question generators for the ``qgen`` pair source (ProQA, Xiong et al. 2020, Sec. 3.1).

ProQA trains a BART question generator on Natural Questions and runs it over Wikipedia; the
generated (question, passage) pairs pretrain the retriever. Without a hub or a GPU here, the
shipped generator is an *answer-aware cloze-to-question transformation* (in the spirit of Lewis
et al. 2019, *Unsupervised Question Answering by Cloze Translation*, Sec. 3's rule-based
baseline): pick a sentence, pick an answer span in it by typed patterns, and rewrite the
sentence around a wh-phrase. It writes questions that share a passage's vocabulary minus the
answer, which is what a factoid retriever must learn to bridge; it does not write fluent
English every time (`results/qgen_samples.md` judges 20 of them by hand).

A generator is any object with ``name`` and ``generate(title, passage, rng) -> (question,
answer) | None``; register a factory in :data:`GENERATORS` to make it a ``--question-generator``
choice. Generators must be deterministic given ``rng`` and picklable (Beam ships them).
"""

from __future__ import annotations

import functools
import random
import re
from typing import Callable, Dict, List, Optional, Protocol, Tuple

from tt_zoo.data.passages import split_sentences


class QuestionGenerator(Protocol):
    name: str

    def generate(self, title: str, passage: str,
                 rng: random.Random) -> Optional[Tuple[str, str]]:
        """(question, answer) for the passage, or None when it cannot make one."""


_YEAR = re.compile(r"\b(?:in |In )?(1[0-9]{3}|20[0-2][0-9])\b")
_NUMBER = re.compile(r"\b(\d[\d,.]*(?: (?:million|billion|thousand|hundred))?) "
                     r"([a-z]+(?:s)?)\b")
# Two or more capitalised words (allowing "of", "the", "de" inside): a name.
_NAME = re.compile(r"\b([A-Z][\w'-]+(?: (?:of|the|de|von|van|da) [A-Z][\w'-]+| "
                   r"[A-Z][\w'-]+)+)")
_PRONOUN = re.compile(r"^(It|He|She|They|Its|His|Her|Their)\b")
_PLACE_PREPOSITIONS = ("in", "at", "near", "from", "to")
_PERSON_VERBS = ("was born", "died", "said", "wrote", "married", "became", "founded",
                 "discovered", "led", "ruled", "invented", "won")


class ClozeQuestionGenerator:
    """Answer-aware cloze-to-question rules (see the module docstring).

    Answer types, tried in a random order for a random sentence of at least ``min_words`` words:
    a year ("When ...?" / "In what year ...?"), a count with its noun ("... how many NOUN ...?"),
    a capitalised name ("Who ...?" when a person verb follows or it opens the sentence before a
    verb, "Where ...?" after a place preposition, else "What ...?"). A sentence that opens with
    a pronoun gets the page title in its place first, since passages refer to their page so.
    The answer is always a verbatim substring of the passage and never left in the question.
    """

    name = "cloze"

    def __init__(self, min_words: int = 6, max_words: int = 40):
        self.min_words, self.max_words = min_words, max_words

    def generate(self, title: str, passage: str,
                 rng: random.Random) -> Optional[Tuple[str, str]]:
        sentences = [s for s in split_sentences(passage)
                     if self.min_words <= len(s.split()) <= self.max_words]
        rng.shuffle(sentences)
        for sentence in sentences:
            makers: List[Callable] = [self._year, self._count, self._name]
            rng.shuffle(makers)
            for make in makers:
                made = make(self._with_title(sentence, title), rng)
                if made is not None and made[1] in passage and made[1] not in made[0]:
                    return made
        return None

    @staticmethod
    def _with_title(sentence: str, title: str) -> str:
        match = _PRONOUN.match(sentence)
        if not match or not title:
            return sentence
        word = match.group(1)
        replacement = title + ("'s" if word in ("Its", "His", "Her", "Their") else "")
        return replacement + sentence[match.end():]

    @staticmethod
    def _finish(text: str) -> str:
        text = re.sub(r"\s+", " ", text).strip(" ,;:")
        text = re.sub(r"\s+([,.;:)?])", r"\1", re.sub(r"[.!?]+$", "", text)).rstrip(" ,;:")
        return text[0].upper() + text[1:] + "?"

    @staticmethod
    def _lower_first(text: str) -> str:
        """Lower-cases the first letter unless the first word looks like a name."""
        first = text.split()[0] if text.split() else ""
        if first[1:] and (first[1:].lower() != first[1:] or first.lower() not in _common()):
            return text
        return text[:1].lower() + text[1:]

    def _year(self, sentence: str, rng) -> Optional[Tuple[str, str]]:
        matches = list(_YEAR.finditer(sentence))
        if not matches:
            return None
        match = rng.choice(matches)
        year = match.group(1)
        rest = (sentence[:match.start()] + sentence[match.end():]).strip()
        rest = re.sub(r"^,\s*", "", rest)
        wh = "When" if rng.random() < 0.5 else "In what year"
        return self._finish(f"{wh} {self._lower_first(rest)}"), year

    def _count(self, sentence: str, rng) -> Optional[Tuple[str, str]]:
        matches = [m for m in _NUMBER.finditer(sentence) if not _YEAR.fullmatch(m.group(1))]
        if not matches:
            return None
        match = rng.choice(matches)
        before, after = sentence[:match.start()].strip(), sentence[match.end():].strip()
        # An echo question where the count was: "The bridge has how many arches ...?"
        question = f"{before} how many {match.group(2)} {after}"
        return self._finish(question), match.group(1)

    def _name(self, sentence: str, rng) -> Optional[Tuple[str, str]]:
        # A capitalised common word opening the sentence ("Much of Wales") is not a name.
        matches = [m for m in _NAME.finditer(sentence)
                   if not (m.start() == 0 and m.group(1).split()[0].lower() in _common())]
        if not matches:
            return None
        match = rng.choice(matches)
        name = match.group(1)
        before, after = sentence[:match.start()].rstrip(), sentence[match.end():].lstrip()
        if not before:  # the name is the subject: "Fleming discovered X." -> "Who discovered X?"
            wh = "Who" if after.startswith(_PERSON_VERBS) or " " not in name.strip() else "What"
            return self._finish(f"{wh} {after}"), name
        last = before.split()[-1].lower() if before.split() else ""
        if last in _PLACE_PREPOSITIONS:
            head = before[: len(before) - len(last)].rstrip()
            return self._finish(f"Where {self._lower_first(head)} {after}"), name
        wh = "who" if after.startswith(_PERSON_VERBS) else "what"
        return self._finish(f"{before} {wh} {after}"), name


@functools.lru_cache(maxsize=1)
def _common():
    """Common English words (scikit-learn's stop words, as the span task uses)."""
    from tt_zoo.data.passage_pair_tasks import stop_words  # noqa: PLC0415

    return stop_words()


GENERATORS: Dict[str, Callable[[], QuestionGenerator]] = {"cloze": ClozeQuestionGenerator}


def get_generator(name: str) -> QuestionGenerator:
    """The registered generator ``name``; an unknown name lists the choices."""
    if name not in GENERATORS:
        raise ValueError(f"Unknown question generator {name!r}; choose one of "
                         f"{sorted(GENERATORS)}.")
    return GENERATORS[name]()
