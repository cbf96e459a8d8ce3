"""Answer one question with HyMem, showing the turns as they happen.

    python -m hymem "In which city was the founder of X born?" --base-url http://127.0.0.1:8000/v1
    python -m hymem "..." --model embedded          # in-process JAX engine
    python -m hymem "..." --corpus data/world/corpus.jsonl --files ./attachments
"""

from __future__ import annotations

import argparse
import json
import sys


def build_tools(corpus: str | None, retrieval_url: str | None, files: list[str]):
    from hymem.tools import Toolbox, file_tool, search_tools

    if retrieval_url:
        from activemem_jax.data.retrieval import RemoteRetriever

        retriever = RemoteRetriever(retrieval_url)
        docs = []
    else:
        from activemem_jax.data import synthetic_world
        from activemem_jax.data.retrieval import BM25Retriever, load_corpus

        docs = load_corpus(corpus) if corpus else synthetic_world.generate(seed=0).documents
        retriever = BM25Retriever(docs)
    return Toolbox(search_tools(retriever, docs) + ([file_tool(files)] if files else []))


class _Live:
    """Wraps a client to print each call's context space and reply."""

    def __init__(self, client, stream=sys.stderr):
        self.client, self.stream = client, stream

    def complete(self, messages, tag=None, **sampling):
        out = self.client.complete(messages, tag=tag, **sampling)
        print(f"--- {tag} ({out.prompt_tokens} prompt tokens)\n{out.text.strip()[:800]}", file=self.stream, flush=True)
        return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="Run HyMem on one question.")
    ap.add_argument("question")
    ap.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--model", default=None, help="with --base-url: the served model name; else a model "
                                                  "path or 'embedded' to run in-process")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--aux-base-url", default=None,
                    help="the auxiliary model's endpoint for phi(o | d) (default: the main model)")
    ap.add_argument("--aux-model", default=None, help="with --aux-base-url: its served model name")
    ap.add_argument("--corpus", default=None, help="JSONL corpus for the search tools (default: synthetic world)")
    ap.add_argument("--retrieval-url", default=None, help="a Search-R1-style retrieval server instead")
    ap.add_argument("--files", nargs="*", default=[], help="directories parse_file may read")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--planner-turns", type=int, default=12)
    ap.add_argument("--execute-turns", type=int, default=10)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    from activemem_jax import compile_cache

    compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE: a directory, or off
    from hymem.agent import HyMemAgent, HyMemConfig
    from hymem.llm import EndpointDown, EngineClient, GuardedClient, OpenAIClient

    if args.base_url:
        client = OpenAIClient(args.base_url, model=args.model, api_key=args.api_key)
    else:
        client = EngineClient.from_model(args.model or "embedded")
    client = GuardedClient(client)  # transient errors retried; a dead endpoint stops the run
    config = HyMemConfig(planner_turns=args.planner_turns, execute_turns=args.execute_turns,
                         sampling={"temperature": 0.0, "max_tokens": args.max_tokens})
    aux = GuardedClient(OpenAIClient(args.aux_base_url, model=args.aux_model, api_key=args.api_key)) \
        if args.aux_base_url else None
    agent = HyMemAgent(client if args.quiet else _Live(client), build_tools(args.corpus, args.retrieval_url,
                                                                            args.files), config, aux=aux)
    try:
        result = agent.run(args.question)
    except EndpointDown as e:
        sys.exit(str(e))
    print(json.dumps({"answer": result.answer, "confidence": result.confidence, "usage": result.usage}, indent=1))


if __name__ == "__main__":
    main()
