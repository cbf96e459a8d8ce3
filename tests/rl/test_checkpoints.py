"""Which checkpoints a run keeps: the newest `keep`, and the steps named to be kept for good
(the trainer names the SFT warm start's end), across a reopened manager too."""

import jax.numpy as jnp
import numpy as np
from flax import nnx


def _params(value: float) -> dict:
    layer = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    layer.kernel[...] = jnp.full((2, 2), value)
    return {"controller": nnx.state(layer), "lora": {}}


def test_the_named_step_outlives_keep(tmp_path):
    from activemem_jax.rl.checkpoints import Checkpoints

    directory = str(tmp_path / "checkpoints")
    ckpt = Checkpoints(directory, keep=2, async_save=False, preserve=(3,))
    try:
        for step in range(1, 7):
            ckpt.save(step, _params(step), {"count": jnp.asarray(step)}, {"size": np.asarray(step)}, {"step": step})
        assert ckpt.steps() == [3, 5, 6]
    finally:
        ckpt.close()
    again = Checkpoints(directory, keep=2, async_save=False, preserve=(3,))  # a resumed run's manager
    try:
        again.save(7, _params(7), {"count": jnp.asarray(7)}, {"size": np.asarray(7)}, {"step": 7})
        assert again.steps() == [3, 6, 7]
        out = again.restore(_params(0), step=3)
        np.testing.assert_array_equal(np.asarray(out["params"]["controller"]["kernel"]), np.full((2, 2), 3.0))
    finally:
        again.close()
    plain = Checkpoints(str(tmp_path / "plain"), keep=2, async_save=False)  # nothing named: the newest 2
    try:
        for step in range(1, 5):
            plain.save(step, _params(step), {"count": jnp.asarray(step)}, {"size": np.asarray(step)}, {"step": step})
        assert plain.steps() == [3, 4]
    finally:
        plain.close()
