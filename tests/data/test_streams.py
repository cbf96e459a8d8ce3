"""Stream order: every stream's episodes in order, lanes side by side, resumable."""

import pytest

from activemem_jax.data.streams import StreamOrder, is_streamed, join_episodes
from activemem_jax.envs.dossier import make_dossier_tasks


def test_each_lane_walks_its_stream_in_order_and_every_stream_is_served():
    tasks = make_dossier_tasks("train", seed=0, streams=6, episodes=3)
    assert is_streamed(tasks) and not is_streamed([{"id": "x"}])
    order = StreamOrder(tasks, lanes=2, seed=5)
    seen = []
    for step in range(9):  # 3 blocks of 2 streams x 3 episodes: one pass
        batch = next(order)
        assert [t["episode"] for t in batch] == [step % 3] * 2
        if step % 3:  # the same streams as the block's first step
            assert [t["stream"] for t in batch] == [t["stream"] for t in seen[-1]]
        seen.append(batch)
    assert sorted({t["stream"] for b in seen for t in b}) == list(range(6))
    again = StreamOrder(tasks, lanes=2, seed=5)
    again.set_state(order.get_state())
    assert next(again) == next(order)  # resumed where it stopped (a new pass, reshuffled)


def test_processes_take_disjoint_lanes():
    tasks = make_dossier_tasks("train", seed=0, streams=8, episodes=2)
    a = next(StreamOrder(tasks, lanes=2, seed=1, process_index=0, process_count=2))
    b = next(StreamOrder(tasks, lanes=2, seed=1, process_index=1, process_count=2))
    assert len(a) == len(b) == 2 and not {t["stream"] for t in a} & {t["stream"] for t in b}


def test_too_few_streams_or_ragged_streams_are_refused():
    tasks = make_dossier_tasks("train", seed=0, streams=2, episodes=2)
    with pytest.raises(ValueError, match="prompts_per_step"):
        StreamOrder(tasks, lanes=3)
    with pytest.raises(ValueError, match="episodes 0..E-1"):
        StreamOrder(tasks[:-1], lanes=1)


def test_consecutive_episodes_join_into_one_task_and_a_span_across_streams_is_refused():
    tasks = make_dossier_tasks("train", seed=0, streams=4, episodes=4)
    order = StreamOrder(tasks, lanes=2, seed=3)
    first, second = next(order), next(order)
    joined = join_episodes([first, second])
    assert len(joined) == 2
    for j, a, b in zip(joined, first, second):
        assert j["stream"] == a["stream"] == b["stream"] and j["episode"] == a["episode"] == 0
        assert j["turns"] == a["turns"] + b["turns"]  # in order: episode 0's turns, then episode 1's
        assert j["live"] == max(a["live"], b["live"]) and j["id"] != a["id"]
    third = next(order)
    with pytest.raises(ValueError, match="grpo_span"):  # episodes 1 and 2 of a 4-episode stream: misaligned
        join_episodes([second, first])
    last = next(order)  # episode 3; the next batch is another block's episode 0
    with pytest.raises(ValueError, match="grpo_span"):
        join_episodes([last, next(order)])
    assert [t["episode"] for t in third] == [2, 2]
