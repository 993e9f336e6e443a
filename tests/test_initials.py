"""The labels of people on the map: initials, lengthened where two are alike, unique in a town."""

from __future__ import annotations

from smallville.replay.initials import initials
from smallville.replay.page import agent_list

from conftest import THE_VILLE


def test_initials_are_lengthened_where_two_people_share_them():
    assert initials({"ann": "Ann Lee", "bo": "Bo Roy"}) == {"ann": "AL", "bo": "BR"}
    assert initials({"m": "Maria Lopez", "l": "Mei Lin", "j": "Jane Smith", "k": "John Smith"}) == {
        "m": "MaL",
        "l": "MeL",
        "j": "JaS",
        "k": "JoS",
    }
    assert initials({"a": "Dakota Smith", "b": "Dakota Smyth"}) == {"a": "DSmi", "b": "DSmy"}
    assert initials({"a": "John Smith", "b": "John Smith", "c": "Cher"}) == {"a": "JS1", "b": "JS2", "c": "C"}


def test_the_villes_labels_tell_everyone_apart():
    from smallville.scenario import load_scenario

    people = agent_list({a.id: a.name for a in load_scenario(THE_VILLE).agents})
    labels = {p["name"]: p["label"] for p in people}
    assert len(set(labels.values())) == len(labels) == 25
    assert (labels["Maria Lopez"], labels["Mei Lin"], labels["Isabella Rodriguez"]) == ("MaL", "MeL", "IR")


def test_a_generated_town_of_a_thousand_has_unique_short_labels(tmp_path):
    from smallville.scenario import load_scenario
    from smallville.town import generate_town, write_town

    write_town(generate_town(1000, 0), tmp_path / "town.yaml")
    labels = [p["label"] for p in agent_list({a.id: a.name for a in load_scenario(tmp_path / "town.yaml").agents})]
    assert len(labels) == len(set(labels)) == 1000
    assert max(map(len, labels)) <= 8
