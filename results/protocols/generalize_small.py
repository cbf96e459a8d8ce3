from configs.activemem_generalize_cpu import get_config as full
from results.protocols.continual_small import small


def get_config():
    return small(full(), "runs/practice_generalize_small", "sources")
