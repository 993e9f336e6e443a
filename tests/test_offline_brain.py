"""The offline brain: rule-based, deterministic, and built to spread news."""

from smallville.brain import requests as rq
from smallville.brain.offline import OfflineBrain, rate

PARTY = "Isabella is planning a Valentine's Day party at Hobbs Cafe on February 14th, 5pm to 7pm."
OWN_PARTY = "I'm planning a Valentine's Day party at Hobbs Cafe on February 14th, 5pm to 7pm."


def ask(brain, request):
    return brain.answer([request])[0]


def dated(*texts):
    """Memories as requests carry them: (when, text)."""
    return tuple(("today 09:00", t) for t in texts)


def said(*memories):
    """What a speaker recalls: (when, text, importance, kind)."""
    return tuple(("today 09:00", *m) for m in memories)


def test_importance_follows_the_words():
    assert rate("the bed is idle") == 1
    assert rate(PARTY) >= 7
    assert rate("Klaus Mueller said to Maria Lopez: nice weather") == 3
    assert 1 <= rate("anything at all") <= 10


def test_answers_are_a_function_of_seed_and_request():
    req = rq.Decompose("ann", "Ann Lee", "reading in the library", "Library", 600, 660, ("desk", "shelf"), ())
    assert ask(OfflineBrain(1), req) == ask(OfflineBrain(1), req)
    different = {ask(OfflineBrain(s), req) for s in range(6)}
    assert len(different) > 1


def test_decomposition_fills_the_block_in_short_actions():
    req = rq.Decompose("ann", "Ann Lee", "reading in the library", "Library", 600, 690, ("desk",), ())
    steps = ask(OfflineBrain(0), req).steps
    assert sum(s.minutes for s in steps) == 90
    assert all(5 <= s.minutes <= 15 for s in steps)
    assert all(s.object in (None, "desk") for s in steps)


def test_day_plan_follows_the_routine_in_hourly_blocks():
    routine = (
        (6 * 60, "wake up", "Home"),
        (9 * 60, "work at the shop", "Shop"),
        (22 * 60, "go to bed and sleep", "Home"),
    )
    plan = ask(
        OfflineBrain(3), rq.PlanDay("ann", "Ann Lee", "", "Monday, February 13, 2023", routine, (), ("Home", "Shop"))
    )
    blocks = plan.blocks
    assert all(b.end - b.start <= 75 for b in blocks if not b.sleep)
    assert [b.sleep for b in blocks].count(True) == 1 and blocks[-1].sleep
    assert [b.start for b in blocks] == sorted(b.start for b in blocks)
    assert all(a.end == b.start for a, b in zip(blocks, blocks[1:]))  # no gaps
    assert any(b.activity == "working at the shop" and b.where == "Shop" for b in blocks)
    assert blocks[-1].activity == "going to bed and sleeping" and blocks[-1].end == 6 * 60 + 24 * 60
    assert abs(blocks[0].start - 6 * 60) <= 20


def test_remembered_appointment_enters_the_plan_of_that_day():
    routine = (
        (6 * 60, "wake up", "Home"),
        (9 * 60, "work at the shop", "Shop"),
        (22 * 60, "go to bed and sleep", "Home"),
    )
    memories = dated("Maria Lopez said to Klaus Mueller: Did you hear? " + PARTY)

    def plan(brain, name, date):
        return ask(brain, rq.PlanDay("k", name, "", date, routine, memories, ("Hobbs Cafe", "Shop"))).blocks

    keen = OfflineBrain(0, attend_chance=1.0)
    party = [b for b in plan(keen, "Klaus Mueller", "Tuesday, February 14, 2023") if b.where == "Hobbs Cafe"]
    assert (party[0].start, party[-1].end) == (17 * 60 - 15, 19 * 60)  # leaves in time to get there
    assert all(a.end == b.start for a, b in zip(party, party[1:]))
    assert not any(b.where == "Hobbs Cafe" for b in plan(keen, "Klaus Mueller", "Monday, February 13, 2023"))
    shy = OfflineBrain(0, attend_chance=0.0)
    assert not any(b.where == "Hobbs Cafe" for b in plan(shy, "Klaus Mueller", "Tuesday, February 14, 2023"))
    assert any(b.where == "Hobbs Cafe" for b in plan(shy, "Isabella Rodriguez", "Tuesday, February 14, 2023"))


def test_speaker_shares_the_most_important_news_not_yet_discussed():
    brain = OfflineBrain(0, gossip=1.0)
    memories = said(
        (PARTY, 10, "seed"),
        ("The coffee machine is idle", 1, "observation"),
        ("Klaus Mueller likes sociology", 10, "seed"),
    )
    first = ask(brain, rq.Speak("isa", "Isabella Rodriguez", "mar", "Maria Lopez", "a friend", (), memories, ()))
    assert OWN_PARTY in first.text and not first.end  # one's own news, in the first person
    assert first.topic == "Isabella's party"
    # Already told in an earlier conversation: the next most important thing instead.
    again = ask(
        brain, rq.Speak("isa", "Isabella Rodriguez", "mar", "Maria Lopez", "a friend", (), memories, (first.text,))
    )
    assert OWN_PARTY not in again.text and "Klaus Mueller likes sociology" in again.text


def test_heard_news_is_passed_on_without_nesting():
    heard = "Isabella Rodriguez said to Maria Lopez: Hi Maria! Did you hear? " + PARTY
    line = ask(
        OfflineBrain(0, gossip=1.0),
        rq.Speak("mar", "Maria Lopez", "kla", "Klaus Mueller", "", (), said((heard, 10, "chat")), ()),
    )
    assert line.text == "Hi Klaus! Did you hear? " + PARTY


def test_gossip_scales_how_often_news_is_passed_on():
    memories = said(("Ann Lee said to Bob Roy: Did you hear? " + PARTY, 7, "chat"))
    told = [
        PARTY
        in ask(OfflineBrain(seed, gossip=0.6), rq.Speak("a", "Ann Lee", "b", "Bob Roy", "", (), memories, ())).text
        for seed in range(200)
    ]
    assert 0.2 < sum(told) / len(told) < 0.5  # 0.6 * (7 - 3) / 7 = 0.34
    silent = ask(OfflineBrain(0, gossip=0.0), rq.Speak("a", "Ann Lee", "b", "Bob Roy", "", (), memories, ()))
    assert PARTY not in silent.text


def test_conversation_ends_when_nothing_is_left_to_say():
    history = (("Ann Lee", "Hi Bob! How is your day going?"), ("Bob Roy", "Pretty good, thanks. Busy as usual."))
    line = ask(
        OfflineBrain(0), rq.Speak("ann", "Ann Lee", "bob", "Bob Roy", "", history, said(("dull", 2, "observation")), ())
    )
    assert line.end


def test_reflection_asks_about_recurring_people_and_cites_evidence():
    brain = OfflineBrain(0)
    memories = dated(
        "Maria Lopez is studying",
        "Maria Lopez said to Ann Lee: hello",
        "Klaus Mueller is reading",
        "Maria Lopez is eating",
    )
    questions = ask(brain, rq.ReflectQuestions("ann", "Ann Lee", memories, 2)).questions
    assert questions == ("What do I think about Maria Lopez?", "What do I think about Klaus Mueller?")
    insights = ask(brain, rq.Insights("ann", "Ann Lee", questions[0], memories)).insights
    assert insights and all(i.because for i in insights)
    assert set().union(*(i.because for i in insights)) <= {0, 1, 3}  # only the evidence about Maria


def test_a_greeting_or_a_chat_line_s_first_word_is_not_taken_for_a_name():
    memories = dated(
        "Ann Lee said to Maria Lopez: Hi Maria! How is your day going?",
        "Maria Lopez said to Ann Lee: Hi Ann! Did you hear? Klaus Mueller is writing a paper.",
        "Ann Lee said to Maria Lopez: Oh, I didn't know that. Thanks Maria, see you at Hobbs Cafe!",
    )
    questions = ask(OfflineBrain(0), rq.ReflectQuestions("ann", "Ann Lee", memories, 3)).questions
    assert questions == (
        "What do I think about Maria Lopez?",
        "What do I think about Hobbs Cafe?",
        "What do I think about Klaus Mueller?",
    )


def test_insights_follow_their_evidence_and_are_not_given_again():
    brain = OfflineBrain(0)
    question = "What do I think about Maria Lopez?"
    studying = dated(
        "Maria Lopez is studying (using the desk)",
        "Maria Lopez is reading",
        "Maria Lopez is painting",
        "Ann Lee said to Maria Lopez: Hi Maria! How is your day going?",
    )
    party = dated(
        "Maria Lopez is eating",
        "Maria Lopez said to Ann Lee: Did you hear? Isabella Rodriguez is planning "
        "a Valentine's Day party at Hobbs Cafe.",
    )
    first = ask(brain, rq.Insights("ann", "Ann Lee", question, studying)).insights
    other = ask(brain, rq.Insights("ann", "Ann Lee", question, party)).insights
    assert {i.text for i in first}.isdisjoint(i.text for i in other)
    assert "Ann often sees Maria painting" in [i.text for i in first]
    assert all(party[i][1].startswith("Maria Lopez said") for i in other[0].because)  # the news cites the talk
    known = tuple(i.text for i in first)
    again = ask(brain, rq.Insights("ann", "Ann Lee", question, studying, known)).insights
    assert again and not {i.text for i in again} & set(known)
    every = known + tuple(i.text for i in again)
    assert ask(brain, rq.Insights("ann", "Ann Lee", question, studying, every)).insights == ()


def test_what_the_speaker_s_summary_says_is_on_its_mind_is_told():
    """A prompt gives the speaker's summary; news of one's own on one's mind is told even when
    no query recalled the memory it came from."""
    summary = (
        "Sam Moore, 65. civic-minded. Sam has been thinking about this: Sam Moore is running for mayor "
        "in the local election."
    )
    dull = said(("Sam Moore is reading the newspaper", 2, "observation"))
    line = ask(OfflineBrain(0), rq.Speak("sam", "Sam Moore", "ann", "Ann Lee", "", (), dull, (), summary)).text
    assert line == "Hi Ann! Guess what? I'm running for mayor in the local election."
    quiet = ask(
        OfflineBrain(0), rq.Speak("sam", "Sam Moore", "ann", "Ann Lee", "", (), dull, (), "Sam Moore, 65.")
    ).text
    assert "mayor" not in quiet


def test_what_was_talked_about_or_inferred_is_not_passed_on_as_news():
    """An insight of one's own, or that two people talked about something, is not news; the
    fact an insight holds is."""
    hearsay = said(
        ("Ann has talked with Bob about Isabella's party", 9, "reflection"),
        ("Ann thinks this matters: Carl Day talked with Bob about Isabella's party", 7, "reflection"),
        ("Ann has been hearing about Hobbs Cafe in talks about Isabella's party", 7, "reflection"),
        ("Ann thinks this matters: Isabella Rodriguez is planning a Valentine's Day party.", 10, "reflection"),
    )
    lines = [
        ask(OfflineBrain(seed, gossip=1.0), rq.Speak("ann", "Ann Lee", "dan", "Dan Roy", "", (), hearsay, ())).text
        for seed in range(10)
    ]
    assert all("Isabella Rodriguez is planning a Valentine's Day party" in line for line in lines)
    told = rq.Speak("ann", "Ann Lee", "dan", "Dan Roy", "", (("Ann Lee", lines[0]), ("Dan Roy", "Oh!")), hearsay, ())
    assert "about" not in ask(OfflineBrain(0, gossip=1.0), told).text


def test_react_replans_on_a_striking_event_and_talks_to_friends():
    brain = OfflineBrain(0)
    event = ask(
        brain, rq.React("ann", "Ann", "reading", ("The Valentine's Day party at Hobbs Cafe has started.",), (), (), ())
    )
    assert event.action == "replan"
    talks = [
        ask(
            brain,
            rq.React(
                "ann",
                "Ann",
                f"reading {i}",
                ("Bob is eating",),
                (("bob", "Bob", "eating", "never talked"),),
                (("bob", "a friend"),),
                (),
            ),
        )
        for i in range(40)
    ]
    assert {t.action for t in talks} == {"talk", "continue"}
    assert all(t.target == "bob" for t in talks if t.action == "talk")


def test_requests_round_trip_and_have_stable_keys():
    req = rq.Speak("isa", "Isabella", "mar", "Maria", "", (("Isabella", "hi"),), said(("x", 3, "chat")), ())
    again = rq.Speak.from_dict(req.to_dict())
    assert again == req and rq.request_key(again) == rq.request_key(req)
    plan = rq.DayPlan((rq.Block(60, 120, "a", "b"),))
    assert rq.DayPlan.from_dict(plan.to_dict()) == plan


def test_own_big_news_is_always_told():
    own = said((PARTY, 8, "seed"))
    lines = [
        ask(OfflineBrain(seed, gossip=0.0), rq.Speak("isa", "Isabella Rodriguez", "b", "Bob Roy", "", (), own, ()))
        for seed in range(20)
    ]
    assert all(line.text == "Hi Bob! Guess what? " + OWN_PARTY for line in lines)
    # and whoever heard it passes it on as news about her, not as their own
    heard = f"Isabella Rodriguez said to Bob Roy: {lines[0].text}"
    told = ask(
        OfflineBrain(0, gossip=1.0), rq.Speak("bob", "Bob Roy", "cy", "Cy Lee", "", (), said((heard, 8, "chat")), ())
    )
    assert (
        told.text
        == "Hi Cy! Did you hear? Isabella Rodriguez is planning a Valentine's Day party at Hobbs Cafe on February 14th, 5pm to 7pm."
    )


def test_every_answer_round_trips_through_json():
    import json

    answers = [
        rq.Importance((3, 7)),
        rq.DayPlan((rq.Block(60, 120, "a", "b"),)),
        rq.Actions((rq.Step(5, "x", "desk"), rq.Step(10, "y"))),
        rq.Reaction("talk", "bob", "hi"),
        rq.Utterance("hello", True),
        rq.Questions(("q?",)),
        rq.InsightList((rq.Insight("t", (1, 2)),)),
    ]
    for answer in answers:
        assert type(answer).from_dict(json.loads(json.dumps(answer.to_dict()))) == answer


def test_routine_phrases_become_activities_without_verbing_nouns():
    from smallville.brain.text import progressive

    assert progressive("open the cafe, bake and serve customers") == "opening the cafe, baking and serving customers"
    assert progressive("sketch people, ducks and trees") == "sketching people, ducks and trees"
    assert progressive("photograph people and trees in the park") == "photographing people and trees in the park"
    assert progressive("discuss ideas and press flowers") == "discussing ideas and pressing flowers"
    assert progressive("keep working on mathematics") == "still working on mathematics"


def test_an_interview_says_each_memory_once():
    """A fact recalled as itself, as told to two people and, in part, in the first person is
    said once; the answer goes on to other facts, and cites every memory it drew on."""
    memories = tuple(
        (i, "today 09:00", text)
        for i, text in (
            (3, PARTY),
            (9, f"Isabella Rodriguez said to Maria Lopez: Hi Maria! Did you hear? {PARTY}"),
            (12, f"Isabella Rodriguez said to Ryan Park: Hi Ryan! Did you hear? {PARTY}"),
            (14, f"Isabella Rodriguez said to Tom Moreno: Guess what? {OWN_PARTY.split(',')[0]}."),
            (15, "Isabella is baking heart-shaped cookies for the party."),
        )
    )
    reply = ask(
        OfflineBrain(0), rq.Interview("isabella", "Isabella Rodriguez", "", "Tell me about the party", memories)
    )
    said = reply.text.removeprefix("From what I remember: ").rstrip(".").split("; ")
    assert said == [PARTY.rstrip("."), "Isabella is baking heart-shaped cookies for the party"]
    assert reply.cites == (3, 9, 12, 14, 15)


def test_the_view_after_a_talk_counts_no_talks():
    """How many talks a pair had is the run's count (the relationship event's); the view is
    words only, so the panel does not show two counts that disagree."""
    lines = (("Ann Lee", "Hi Bob!"), ("Bob Roy", "Hi Ann."))
    chat = ("Ann Lee said to Bob Roy: Hi Bob!",) * 4
    notes = ask(OfflineBrain(0), rq.AfterTalk("ann", "Ann Lee", "bob", "Bob Roy", "", lines, chat))
    assert notes.view.startswith("someone Ann has talked with") and not any(c.isdigit() for c in notes.view)


def test_own_news_is_said_in_the_first_person_whatever_its_wording():
    """A fact that names the speaker is said by them in the first person, however it is
    worded; whoever hears it passes it on as news of them, and not to those it names."""
    cases = (
        (
            "Sam Moore",
            "Sam and his neighbour Adam Smith argue about philosophy over coffee once a week.",
            "My neighbour Adam Smith and I argue about philosophy over coffee once a week.",
        ),
        (
            "Ayesha Khan",
            "Ayesha's thesis argues that Shakespeare's comedies use wordplay.",
            "My thesis argues that Shakespeare's comedies use wordplay.",
        ),
        (
            "Sam Moore",
            "Yuriko Yamamoto helped Sam and Jennifer with their tax return last year.",
            "Yuriko Yamamoto helped Jennifer and me with our tax return last year.",
        ),
        ("Rajiv Patel", "Rajiv has a crush on Abigail Chen but has never told her.", "I have a crush on Abigail Chen."),
        (
            "Latoya Williams",
            "Latoya loves talking politics and reads the local news every morning.",
            "I love talking politics.",
        ),
        (
            "Klaus Mueller",
            "Maria thinks Klaus Mueller's research on gentrification is fascinating.",
            "Maria thinks my research on gentrification is fascinating.",
        ),
        (
            "Eddy Lin",
            "Eddy likes walking around Johnson Park when he is stuck on a melody.",
            "I like walking around Johnson Park when I'm stuck on a melody.",
        ),
        (
            "Jennifer Moore",
            "Jennifer wishes Sam would spend more quiet time at home now that he is retired.",
            "I wish Sam would spend more quiet time at home now that he is retired.",
        ),
        (
            "Carlos Gomez",
            "Giorgio and Carlos Gomez had a loud argument in the hallway of their building.",
            "Giorgio and I had a loud argument in the hallway of our building.",
        ),
        (
            "Sam Moore",
            "Sam Moore and their neighbour Adam Smith argue about philosophy.",  # heard back
            "My neighbour Adam Smith and I argue about philosophy.",
        ),
        (
            "Isabella Rodriguez",  # her own thought, heard back from someone she told it to
            "Isabella Rodriguez thinks they should tell their regulars about the party while they serve them.",
            "I think I should tell my regulars about the party while I serve them.",
        ),
    )
    for name, fact, line in cases:
        spoken = ask(OfflineBrain(0), rq.Speak("a", name, "z", "Zoe Day", "", (), said((fact, 8, "seed")), ())).text
        assert spoken == f"Hi Zoe! Guess what? {line}", name
    heard = (
        "Sam Moore said to Zoe Day: Hi Zoe! Guess what? My neighbour Adam Smith and I argue about philosophy "
        "over coffee once a week."
    )
    memories = said((heard, 8, "chat"))
    told = ask(OfflineBrain(0, gossip=1.0), rq.Speak("z", "Zoe Day", "c", "Cy Lee", "", (), memories, ())).text
    assert told == (
        "Hi Cy! Did you hear? Sam Moore and their neighbour Adam Smith argue about philosophy over coffee once a week."
    )
    for named in ("Adam Smith", "Sam Moore"):  # news of the listener is not news to them
        line = ask(OfflineBrain(0, gossip=1.0), rq.Speak("z", "Zoe Day", "x", named, "", (), memories, ())).text
        assert "philosophy" not in line


def test_a_plan_is_not_news():
    """The hours of a plan, one's own or another's, even one an agent thought mattered, are not
    told: "Guess what? My plan for Monday ..." is no news."""
    plan = "Carlos Gomez's plan for Monday, February 13, 2023: writing poetry at 10:30; the party at 17:00"
    for memory in ((plan, 8, "seed"), (f"Carlos thinks this matters: {plan}", 8, "reflection")):
        for name in ("Carlos Gomez", "Ann Lee"):
            line = ask(OfflineBrain(0, gossip=1.0), rq.Speak("a", name, "z", "Zoe Day", "", (), said(memory), ())).text
            assert line == "Hi Zoe! How is your day going?", (name, line)


def test_fillers_between_steps_say_no_one_s_name():
    """The brain knows no one's pronouns: "checking messages", never "checking Bob's phone"."""
    steps = {
        s.description
        for seed in range(40)
        for s in ask(OfflineBrain(seed), rq.Decompose("bob", "Bob Roy", "reading", "Home", 600, 720, (), ())).steps
    }
    assert steps - {"reading"}, "no filler was drawn"
    assert not any("Bob" in s or "'s " in s for s in steps), steps


def test_the_question_of_how_the_days_went_is_answered_not_restated():
    """With too few people in the latest memories an agent asks how it has been spending its
    days; the insights answer that, and none of them holds the question."""
    memories = dated(
        "Ann Lee is painting (using the easel)",
        "Ann Lee is painting",
        "Ann Lee is idling",
        "Ann Lee is reading",
        "the easel is in use by Ann Lee",
    )
    brain = OfflineBrain(0)
    questions = ask(brain, rq.ReflectQuestions("ann", "Ann Lee", memories, 1)).questions
    assert questions == ("How has Ann been spending the days?",)
    insights = ask(brain, rq.Insights("ann", "Ann Lee", questions[0], memories)).insights
    texts = [i.text for i in insights]
    assert texts[:2] == ["Ann has often been reading lately", "Ann has often been painting lately"], texts
    assert not any("How has" in t or "has been a part of" in t for t in texts)


def test_the_notes_after_a_talk_name_the_news_in_a_few_words():
    """The thought after a talk names the news told in a few words, one's own as "my ...";
    an appointment someone else told of becomes the memo, one's own does not."""

    def notes(name, other, line):
        lines = ((other, f"Hi! {line}"), (name, "Oh, I didn't know that."))
        return ask(OfflineBrain(0), rq.AfterTalk("a", name, "b", other, "", lines, ()))

    heard = notes("Maria Lopez", "Latoya Williams", "Did you hear? Latoya Williams loves talking politics.")
    assert heard.thought == "I want to keep Latoya's news in mind when I plan my day" and heard.memo == ""
    party = notes("Maria Lopez", "Isabella Rodriguez", "Guess what? " + OWN_PARTY)
    assert party.thought == "I want to keep Isabella's party in mind when I plan my day"
    assert party.memo == "I should keep in mind: " + PARTY.replace("Isabella is", "Isabella Rodriguez is")
    mine = ask(
        OfflineBrain(0),
        rq.AfterTalk(
            "i",
            "Isabella Rodriguez",
            "m",
            "Maria Lopez",
            "",
            (("Isabella Rodriguez", "Hi Maria! Guess what? " + OWN_PARTY),),
            (),
        ),
    )
    assert mine.thought == "I told Maria about my party" and mine.memo == ""


def test_the_summary_says_what_the_day_s_plan_holds():
    """The day's plan comes with the request (a query need not recall it); before it is made,
    a plan recalled stands in, and without either the summary says nothing of the days."""
    older = (("yesterday 07:00", "Ann Lee's plan for Monday, February 13, 2023: reading at 7:00"),)
    today = "Ann Lee's plan for Tuesday, February 14, 2023: painting at 6:30"

    def occupation(recalled, plan):
        return ask(OfflineBrain(0), rq.Summarize("ann", "Ann Lee", "", (), recalled, (), "", "", plan)).occupation

    assert occupation(older, today) == "Lately Ann's days go: painting at 6:30."
    assert occupation(older, "") == "Lately Ann's days go: reading at 7:00."
    assert occupation((), "") == ""


def test_each_day_s_summary_is_written_after_its_plan():
    """An agent plans from the summary it holds (the run's first plan from one written just
    before it), then writes the day's summary, which says what the plan holds."""
    from smallville.embed import make_embedder
    from smallville.scenario import load_scenario
    from smallville.sim import Simulation

    from conftest import CAFE_TRIO

    class Noting(OfflineBrain):
        def __init__(self):
            super().__init__(1)
            self.noted = []

        def answer(self, requests):
            answers = super().answer(requests)
            self.noted += [
                (r, a)
                for r, a in zip(requests, answers)
                if r.kind == "summarize" or r.kind == "plan_day" and not r.start
            ]
            return answers

    brain = Noting()
    Simulation(load_scenario(CAFE_TRIO), brain, make_embedder("lexical"), seed=1).run(25 * 3600)
    for agent in ("isabella_rodriguez", "maria_lopez", "klaus_mueller"):
        mine = [(r, a) for r, a in brain.noted if r.agent == agent]
        kinds = [r.kind for r, _ in mine]
        assert kinds[:3] == ["summarize", "plan_day", "summarize"] and kinds.count("plan_day") == 2, kinds
        for i, (request, plan) in enumerate(mine):
            if request.kind == "plan_day":
                _, summary = mine[i + 1]
                assert "; ".join(plan.broad) in summary.occupation, summary
                assert request.persona and (i == 1 or "Lately" in request.persona)
