"""TextWorld's generated games as the offline embodied task family (`data.name="textworld"`).

    tasks = make_textworld_tasks("tw-simple", "--rewards dense --goal detailed", "train", 16, cache)

A game is one of textworld's challenges (tw-simple, tw-cooking, tw-coin_collector,
tw-treasure_hunter) made with `tw-make`'s arguments for it (`data.textworld.args`) from a
seed. The splits are disjoint seed ranges (SPLIT_SEEDS: train from 0, dev from 100,000, test
from 200,000; game k of a split has seed base + k), and a challenge that has its own held-out
content gets it too: tw-simple's `--test` for the test split, tw-cooking's `--split
valid / test`. Games are generated at first use (2 to 3 s each here) into a cache directory
(`data.path`, else ~/.cache/activemem-jax/textworld) and reused: the same challenge,
arguments and seed give the same game on any machine. Each game carries its walkthrough
(SFT's expert where the quest solver gives no plan) and its admissible commands.
Played by envs/text_games.TextGameEnv.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import tempfile
import warnings

from activemem_jax.envs.text_games import check_textworld

SPLIT_SEEDS = {"train": 0, "dev": 100_000, "test": 200_000}
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "activemem-jax", "textworld")


class _Args(argparse.ArgumentParser):
    def error(self, message):  # a bad argument is the config's error, not an exit
        raise ValueError(f"data.textworld.args for {self.prog}: {message}; its arguments: {self.format_usage().strip()}")


def challenge_settings(challenge: str, args: str, split: str) -> dict:
    """The challenge's settings as tw-make parses them from `args`, with the split's own
    held-out content where the challenge has it."""
    import textworld.challenges

    if challenge not in textworld.challenges.CHALLENGES:
        raise ValueError(f"data.textworld.challenge={challenge!r}: the challenges are "
                         f"{', '.join(sorted(textworld.challenges.CHALLENGES))}")
    if split not in SPLIT_SEEDS:
        raise ValueError(f"data.split={split!r}: TextWorld's splits here are {tuple(SPLIT_SEEDS)}")
    _, _, add_arguments = textworld.challenges.CHALLENGES[challenge]
    parser = _Args(prog=challenge, add_help=False)
    add_arguments(parser)
    argv = shlex.split(args)
    known = {a for action in parser._actions for a in action.option_strings}
    if split == "test" and "--test" in known and "--test" not in argv:
        argv.append("--test")
    if "--split" in known and "--split" not in argv:
        argv += ["--split", {"dev": "valid"}.get(split, split)]
    return vars(parser.parse_args(argv))


def game_path(cache: str, challenge: str, args: str, split: str, seed: int) -> str:
    key = hashlib.sha1(f"{challenge} {' '.join(shlex.split(args))}".encode()).hexdigest()[:10]
    return os.path.join(cache, f"{challenge}-{key}", f"{split}-{seed}.z8")


def generate(challenge: str, settings: dict, seed: int, path: str) -> str:
    """Make and compile one game at `path` (its .json beside it); written whole or not at all."""
    import textworld
    import textworld.challenges

    _, make, _ = textworld.challenges.CHALLENGES[challenge]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = tempfile.mkdtemp(dir=os.path.dirname(path), prefix=".gen-")
    try:
        options = textworld.GameOptions()
        options.seeds = seed
        options.path = os.path.join(tmp, "game.z8")
        options.file_ext = ".z8"
        options.force_recompile = True
        with warnings.catch_warnings():  # jericho's "not fully supported" while textworld checks the walkthrough
            warnings.simplefilter("ignore")
            game = make(settings=dict(settings), options=options)
            made = textworld.generator.compile_game(game, options)
        os.replace(os.path.splitext(made)[0] + ".json", os.path.splitext(path)[0] + ".json")
        os.replace(made, path)  # the .z8 last: its presence means the pair is complete
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def make_textworld_tasks(challenge: str, args: str, split: str, n_tasks: int, cache: str = "") -> list[dict]:
    """n_tasks games of `split` (seeds base, base + 1, ...), generated where not cached."""
    check_textworld()
    cache = cache or os.environ.get("ACTIVEMEM_TEXTWORLD_CACHE", DEFAULT_CACHE)
    settings = challenge_settings(challenge, args, split)
    tasks = []
    for k in range(n_tasks):
        seed = SPLIT_SEEDS[split] + k
        path = game_path(cache, challenge, args, split, seed)
        if not (os.path.exists(path) and os.path.exists(os.path.splitext(path)[0] + ".json")):
            generate(challenge, settings, seed, path)
        tasks.append({"id": f"textworld-{challenge}-{split}-{seed}", "game": path, "kind": "z8", "split": split,
                      "seed": seed, "answers": [["won"]]})
    return tasks


__all__ = ["DEFAULT_CACHE", "SPLIT_SEEDS", "challenge_settings", "game_path", "generate", "make_textworld_tasks"]
