"""An older recipe as a list of changes to the current one (dossier_span), not a chain."""

from activemem_jax.config_files import apply_overrides


def on_span(overrides):
    from configs.experiments.dossier_span import get_config

    c = get_config()
    apply_overrides(c, overrides)
    return c
