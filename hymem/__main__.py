"""Answer one question with HyMem, showing the turns as they happen.

    python -m hymem "In which city was the founder of X born?" --base-url http://127.0.0.1:8000/v1
    python -m hymem "..." --model embedded          # in-process JAX engine
    python -m hymem "..." --corpus data/world/corpus.jsonl --files ./attachments

stderr gets one progress line per planner turn (and, without --quiet, each model call's
text); stdout gets the result as JSON. When the planner spends its turns without an
<answer>, the forced-answer turn decides: its <answer> when it wrote one, else its text
as written, and either way the result says "forced": true and why. Evaluations do not
do this: `launch/eval_agents.py` scores an unparsable forced turn as no answer
(`Result.answer` is "" there; see docs/hymem_cli.md).

--constrained auto|on|off: each turn decoded under its protocol's grammar
(hymem/grammars.py); auto, the default, is on for this project's server and the
in-process engine (docs/hymem_cli.md#constrained-decoding).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def build_tools(corpus: str | None, retrieval_url: str | None, files: list[str], bad_rows: str = "strict"):
    from hymem.tools import Toolbox, file_tool, search_tools

    if retrieval_url:
        from activemem_jax.data.retrieval import RemoteRetriever

        retriever = RemoteRetriever(retrieval_url)
        docs = []
    else:
        from activemem_jax.data import synthetic_world
        from activemem_jax.data.retrieval import BM25Retriever, load_corpus

        docs = load_corpus(corpus, bad_rows) if corpus else synthetic_world.generate(seed=0).documents
        retriever = BM25Retriever(docs)
    return Toolbox(search_tools(retriever, docs) + ([file_tool(files)] if files else []))


class _Live:
    """Wraps a client to print each call's context space and reply."""

    def __init__(self, client, stream=sys.stderr):
        self.client, self.stream = client, stream
        if hasattr(client, "count_tokens"):  # the agent's fold trigger counts with it
            self.count_tokens = client.count_tokens
        if hasattr(client, "supports_constraints"):  # constrained="auto" asks it
            self.supports_constraints = client.supports_constraints

    def complete(self, messages, tag=None, **sampling):
        out = self.client.complete(messages, tag=tag, **sampling)
        print(f"--- {tag} ({out.prompt_tokens} prompt tokens)\n{out.text.strip()[:800]}", file=self.stream, flush=True)
        return out


class Progress:
    """One line per planner turn on `stream`, from the agent's trace events."""

    def __init__(self, planner_turns: int, stream=sys.stderr):
        self.planner_turns, self.stream, self.start = planner_turns, stream, time.perf_counter()

    def __call__(self, event) -> None:
        from hymem.events import ForcedAnswer, PlannerTurn

        if isinstance(event, PlannerTurn):
            what = f"planner turn {event.turn}/{self.planner_turns}: {event.action or '?'}"
            tokens = event.total_tokens
        elif isinstance(event, ForcedAnswer):
            what = "forced answer turn: " + ("<answer> written" if event.parsed else event.why)
            tokens = None
        else:
            return
        elapsed = time.perf_counter() - self.start
        print(f"[hymem] {what}" + (f" | {tokens:,} tokens so far" if tokens is not None else "")
              + f" | {elapsed:.0f} s", file=self.stream, flush=True)


def reply(result) -> dict:
    """The CLI's answer: the agent's, or the forced turn's text when that turn wrote no
    parsable <answer> (marked "forced", with why)."""
    forced = next((e for e in reversed(result.trace) if e["type"] == "forced_answer"), None)
    out = {"answer": result.answer, "forced": forced is not None}
    if forced is not None:
        if forced["parsed"]:
            out["why"] = "the planner spent its turns without an <answer>; the forced turn's <answer> is returned"
        else:
            out["answer"] = forced["text"].strip()
            out["why"] = (f"{forced['why']}; its text is returned as is (an evaluation scores this run "
                          "as unanswered)")
    return {**out, "confidence": result.confidence, "usage": result.usage}


def answer(question: str, client, tools, config, aux=None, live: bool = True, stream=sys.stderr) -> dict:
    """Run HyMem on `question` and return the CLI's answer; progress goes to `stream`."""
    from hymem.agent import HyMemAgent

    agent = HyMemAgent(_Live(client, stream) if live else client, tools, config, aux=aux,
                       on_event=Progress(config.planner_turns, stream))
    return reply(agent.run(question))


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
    ap.add_argument("--bad-rows", default="strict", choices=("strict", "skip"),
                    help="with --corpus: drop bad corpus lines (one line per reason) instead of stopping")
    ap.add_argument("--retrieval-url", default=None, help="a Search-R1-style retrieval server instead")
    ap.add_argument("--files", nargs="*", default=[], help="directories parse_file may read")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--planner-turns", type=int, default=12)
    ap.add_argument("--execute-turns", type=int, default=10)
    ap.add_argument("--constrained", default="auto", choices=("auto", "on", "off"),
                    help="decode each turn under its protocol's grammar (hymem.grammars): auto = on for this "
                         "project's own server (asked at GET /models) and the in-process engine, off for other "
                         "endpoints; on = send it anyway (vLLM takes it as guided_grammar)")
    ap.add_argument("--quiet", action="store_true",
                    help="do not print each model call's text (the one progress line per planner turn stays)")
    args = ap.parse_args(argv)
    from activemem_jax.tooling import compile_cache

    compile_cache.enable()  # $ACTIVEMEM_COMPILE_CACHE: a directory, or off
    from hymem.agent import HyMemConfig
    from hymem.llm import EndpointDown, EngineClient, GuardedClient, OpenAIClient

    if args.base_url:
        client = OpenAIClient(args.base_url, model=args.model, api_key=args.api_key)
    else:
        client = EngineClient.from_model(args.model or "embedded")
    client = GuardedClient(client)  # transient errors retried; a dead endpoint stops the run
    config = HyMemConfig(planner_turns=args.planner_turns, execute_turns=args.execute_turns,
                         sampling={"temperature": 0.0, "max_tokens": args.max_tokens},
                         constrained=args.constrained)
    aux = GuardedClient(OpenAIClient(args.aux_base_url, model=args.aux_model, api_key=args.api_key)) \
        if args.aux_base_url else None
    tools = build_tools(args.corpus, args.retrieval_url, args.files, args.bad_rows)
    try:
        out = answer(args.question, client, tools, config, aux=aux, live=not args.quiet)
    except EndpointDown as e:
        sys.exit(str(e))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
