"""The dossier recipe (configs/activemem_dossier_cpu.py) on streams three times as long, so
that episode-end maintenance has work: 12 episodes a stream, 4 new attributes each, and
questions that reach back one episode, so by the last episode three quarters of what a
stream's tree holds is never asked again, and the root's 16 children are full by episode
8 (later entities then land under an unrelated entity, where the search does not reach
them). The prune removes a quarter of the nodes at each episode end
(`policy.prune_fraction=0.25`, about the rate new attributes arrive; the paper's 5% does
not keep up with them). With the paper's utility rule as written a node starts at S_EMA =
0 and one read leaves it at beta x S, below a stale node read in earlier episodes; here a
node the episode wrote counts as activated (`policy.credit_writes`), its first activation
sets its utility (`policy.utility_start="first"`), and an unread node decays
(`idle_utility="decay"`, as in the base recipe) at beta 0.3. Measured in the runs logged in the git
history of docs/memory_streams.md (long streams).

    python -m launch.train --config configs/activemem_dossier_long_cpu.py "--config.train.seeds=()"
    python -m launch.score_streams --config configs/activemem_dossier_long_cpu.py --variants "full,w/o merge/delete"
"""

from configs.activemem_dossier_cpu import get_config as dossier_config


def get_config():
    c = dossier_config()
    c.out_dir = "runs/activemem_dossier_long_cpu"
    c.policy.update(credit_writes=True, utility_start="first", ema_beta=0.3, prune_fraction=0.25)
    c.data.dossier.update(episodes=12)  # 600 steps x 8 streams run 400 of the 2,048 streams
    c.eval.update(n_tasks=96)  # 8 held-out streams of 12 episodes (384 questions)
    return c
