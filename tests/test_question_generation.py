"""The offline question generator of the qgen pair source, on hand-checked sentences."""

import pickle
import random

import pytest

from tt_zoo.data.question_generation import ClozeQuestionGenerator, get_generator


def _all(passage, title="Page", seeds=range(40)):
    generator = ClozeQuestionGenerator()
    return {generator.generate(title, passage, random.Random(s)) for s in seeds}


def test_year_answers_become_when_questions():
    passage = "Alexander Fleming discovered penicillin in 1928 at St Mary's Hospital."
    made = _all(passage)
    assert ("When Alexander Fleming discovered penicillin at St Mary's Hospital?", "1928") in made
    assert ("In what year Alexander Fleming discovered penicillin at St Mary's Hospital?",
            "1928") in made


def test_subject_names_become_who_questions_and_places_where():
    made = _all("Alexander Fleming discovered penicillin while working in London.")
    assert ("Who discovered penicillin while working in London?", "Alexander Fleming") in made
    assert ("Where Alexander Fleming discovered penicillin while working?", "London") not in made
    places = _all("The old bridge over the river was built near Saint Petersburg by engineers.")
    assert ("Where the old bridge over the river was built by engineers?",
            "Saint Petersburg") in places


def test_counts_become_how_many_questions():
    made = _all("The bridge has 12 arches and spans the whole river valley.")
    assert ("The bridge has how many arches and spans the whole river valley?", "12") in made


def test_answers_are_verbatim_and_absent_from_the_question():
    passage = ("It was founded in 1850 by John Smith. The town has 3 churches and a market. "
               "Its mayor since 2001 is Mary Jones of the Liberal Party.")
    for made in _all(passage, title="Smithville", seeds=range(100)) - {None}:
        question, answer = made
        assert answer in passage and answer not in question and question.endswith("?")
    # A leading pronoun is the page title.
    assert any(q and q[0].startswith(("When Smithville", "In what year Smithville"))
               for q in _all(passage, title="Smithville", seeds=range(100)))


def test_nothing_usable_gives_none_and_seeds_are_deterministic():
    generator = get_generator("cloze")
    assert generator.generate("T", "Too short here.", random.Random(0)) is None
    assert generator.generate("T", "the cat sat on a mat all day long without end.",
                              random.Random(0)) is None
    passage = "Marie Curie won the Nobel Prize in 1903 and again in 1911 for chemistry."
    assert ({generator.generate("T", passage, random.Random(5)) for _ in range(3)}
            == {generator.generate("T", passage, random.Random(5))})


def test_registry_and_pickling():
    with pytest.raises(ValueError, match=r"Unknown question generator 'bart'.*\['cloze'\]"):
        get_generator("bart")
    generator = pickle.loads(pickle.dumps(get_generator("cloze")))
    passage = "Marie Curie won the Nobel Prize in 1903 for physics with her husband."
    assert generator.generate("T", passage, random.Random(1)) == \
        get_generator("cloze").generate("T", passage, random.Random(1))
