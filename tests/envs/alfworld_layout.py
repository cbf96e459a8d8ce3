"""A small kitchen in ALFWorld's file layout, written by the tests (no ALFWorld download here):
its own PDDL domain (go to a receptacle, open it, take an object, put it somewhere), a
problem per game with ALFWorld-style object ids, and a text grammar in textworld's PDDL
grammar format.

    root = write_games(tmp_path)   # json_2.1.1/{train,valid_seen}/<task dir>/<trial>/...
"""

import json
import os

DOMAIN = """
(define (domain home)
 (:requirements :adl :typing :action-costs)
 (:types agent location receptacle object rtype otype)
 (:predicates
    (atLocation ?a - agent ?l - location)
    (receptacleAtLocation ?r - receptacle ?l - location)
    (openable ?r - receptacle)
    (opened ?r - receptacle)
    (inReceptacle ?o - object ?r - receptacle)
    (holds ?a - agent ?o - object)
    (holdsAny ?a - agent)
    (receptacleType ?r - receptacle ?t - rtype)
    (objectType ?o - object ?t - otype)
    (checked ?r - receptacle))
 (:functions (total-cost) - number)
 (:action GotoLocation
    :parameters (?a - agent ?lStart - location ?lEnd - location ?r - receptacle)
    :precondition (and (atLocation ?a ?lStart) (receptacleAtLocation ?r ?lEnd))
    :effect (and (not (atLocation ?a ?lStart)) (atLocation ?a ?lEnd) (increase (total-cost) 1)))
 (:action OpenObject
    :parameters (?a - agent ?l - location ?r - receptacle)
    :precondition (and (openable ?r) (atLocation ?a ?l) (receptacleAtLocation ?r ?l) (not (opened ?r)))
    :effect (and (opened ?r) (checked ?r) (increase (total-cost) 1)))
 (:action PickupObject
    :parameters (?a - agent ?l - location ?o - object ?r - receptacle)
    :precondition (and (atLocation ?a ?l) (receptacleAtLocation ?r ?l) (inReceptacle ?o ?r) (not (holdsAny ?a))
                       (or (not (openable ?r)) (opened ?r)))
    :effect (and (not (inReceptacle ?o ?r)) (holds ?a ?o) (holdsAny ?a) (increase (total-cost) 1)))
 (:action PutObject
    :parameters (?a - agent ?l - location ?o - object ?r - receptacle)
    :precondition (and (holds ?a ?o) (atLocation ?a ?l) (receptacleAtLocation ?r ?l) (or (not (openable ?r)) (opened ?r)))
    :effect (and (inReceptacle ?o ?r) (not (holds ?a ?o)) (not (holdsAny ?a)) (increase (total-cost) 1)))
)
"""

GRAMMAR = '''grammar :: """
{
  "intro": [{"rhs": "-= Welcome to the kitchen =-\\n\\n#look.feedback#\\n\\n#task#"}],
  "task": [{"rhs": "Your task is to: GOAL"}],
  "look.feedback": [{"rhs": "You are in the middle of a room. Around you, you see [{r.indefinite + ' ' + r.name | receptacleatlocation(r:receptacle, l:location)}]."}],
  "GotoLocation.feedback": [{"rhs": "You arrive at the {r.name}. #examineReceptacle.feedback#"}],
  "OpenObject.feedback": [{"rhs": "You open the {r.name}. #examineReceptacle.feedback#"}],
  "PickupObject.feedback": [{"rhs": "You pick up the {o.name} from the {r.name}."}],
  "PutObject.feedback": [{"rhs": "You put the {o.name} in/on the {r.name}."}],
  "examineReceptacle.feedback": [
     {"condition": "openable(r:receptacle) & opened(r:receptacle)", "rhs": "The {r.name} is open. In it, you see [{o.indefinite + ' ' + o.name | inreceptacle(o:object, r:receptacle)}]."},
     {"condition": "openable(r:receptacle)", "rhs": "The {r.name} is closed."},
     {"rhs": "On the {r.name}, you see [{o.indefinite + ' ' + o.name | inreceptacle(o:object, r:receptacle)}]."}],
  "list_empty": [{"rhs": "nothing"}],
  "list_separator": [{"rhs": ", "}],
  "list_last_separator": [{"rhs": ", and "}]
}
""";
action GotoLocation { template :: "go to {r}"; feedback :: "#GotoLocation.feedback#"; }
action OpenObject { template :: "open {r}"; feedback :: "#OpenObject.feedback#"; }
action PickupObject { template :: "take {o} from {r}"; feedback :: "#PickupObject.feedback#"; }
action PutObject { template :: "put {o} in/on {r}"; feedback :: "#PutObject.feedback#"; }
'''

MUG = "Mug_bar__minus_01_dot_62_bar__plus_00_dot_90"
APPLE = "Apple_bar__plus_00_dot_10_bar__plus_00_dot_90"
COUNTER = "CounterTop_bar__minus_00_dot_08_bar__plus_01_dot_15"
CABINET = "Cabinet_bar__plus_00_dot_95_bar__plus_02_dot_16"


def problem(thing_type: str, place_type: str, swapped: bool = False) -> str:
    """The kitchen with the mug in the (closed) cabinet and the apple on the countertop (the
    other way round when swapped); the goal puts an object of thing_type in/on a receptacle
    of place_type."""
    mug_in, apple_in = (COUNTER, CABINET) if swapped else (CABINET, COUNTER)
    return f"""
(define (problem kitchen) (:domain home)
 (:objects agent1 - agent
   loc_bar_0_bar_0 loc_bar_1_bar_2 loc_bar_3_bar_1 - location
   {COUNTER} {CABINET} - receptacle
   {MUG} {APPLE} - object
   CounterTopType CabinetType - rtype MugType AppleType - otype)
 (:init (atLocation agent1 loc_bar_0_bar_0)
   (receptacleAtLocation {COUNTER} loc_bar_1_bar_2)
   (receptacleAtLocation {CABINET} loc_bar_3_bar_1)
   (openable {CABINET})
   (inReceptacle {MUG} {mug_in})
   (inReceptacle {APPLE} {apple_in})
   (receptacleType {COUNTER} CounterTopType)
   (receptacleType {CABINET} CabinetType)
   (objectType {MUG} MugType)
   (objectType {APPLE} AppleType)
   (= (total-cost) 0))
 (:goal (exists (?o - object ?r - receptacle)
   (and (objectType ?o {thing_type}) (receptacleType ?r {place_type}) (inReceptacle ?o ?r))))
 (:metric minimize (total-cost))
)
"""


GAMES = (  # (split, task dir, goal text, object type, receptacle type, solvable); valid_seen's kitchen is swapped
    ("train", "pick_and_place_simple-Mug-None-CounterTop-1", "put a mug on the countertop.", "MugType",
     "CounterTopType", True),
    ("train", "pick_and_place_simple-Apple-None-Cabinet-1", "put an apple in the cabinet.", "AppleType",
     "CabinetType", True),
    ("train", "pick_and_place_simple-Mug-None-Cabinet-1", "put a mug in the cabinet.", "MugType", "CabinetType",
     False),  # its file says it is not solvable: left out, as ALFWorld does
    ("train", "pick_and_place_simple-AppleSliced-None-Cabinet-1", "put an apple slice in the cabinet.",
     "AppleType", "CabinetType", True),  # a "Sliced" folder: left out, as ALFWorld does
    ("valid_seen", "pick_and_place_simple-Apple-None-CounterTop-2", "put an apple on the countertop.",
     "AppleType", "CounterTopType", True),
)


def write_games(root) -> str:
    """ALFWorld's layout under root; returns root."""
    for k, (split, task_dir, goal, thing_type, place_type, solvable) in enumerate(GAMES):
        trial = os.path.join(str(root), "json_2.1.1", split, task_dir, f"trial_T2019_{k:04d}")
        os.makedirs(trial, exist_ok=True)
        game = {"pddl_domain": DOMAIN, "pddl_problem": problem(thing_type, place_type, swapped=split != "train"),
                "grammar": GRAMMAR.replace("GOAL", goal), "solvable": solvable}
        with open(os.path.join(trial, "game.tw-pddl"), "w") as f:
            json.dump(game, f)
        with open(os.path.join(trial, "traj_data.json"), "w") as f:
            json.dump({"task_type": task_dir.split("-")[0], "task_id": f"trial_T2019_{k:04d}"}, f)
        with open(os.path.join(trial, "initial_state.pddl"), "w") as f:
            f.write(game["pddl_problem"])
    return str(root)
