"""HyMem: a training-free orchestrator that keeps the planner's context clean.

    from hymem import HyMemAgent, HyMemConfig
    agent = HyMemAgent(client, toolbox, HyMemConfig())
    result = agent.run("question")  # Result(answer, confidence, trace, usage)
    agent = build("amem", client, toolbox)   # any registered agent by name (hymem.protocol)

Imports no JAX: it talks to models through `hymem.llm` clients (an OpenAI-compatible
endpoint, or the in-process engine imported lazily).
"""

from hymem.agent import HyMemAgent, HyMemConfig
from hymem.llm import Completion, EngineClient, ModelClient, OpenAIClient, ScriptedClient
from hymem.protocol import Result, build, names
from hymem.tools import Tool, Toolbox, file_tool, search_tools

__all__ = ["Completion", "EngineClient", "HyMemAgent", "HyMemConfig", "ModelClient", "OpenAIClient",
           "Result", "ScriptedClient", "Tool", "Toolbox", "build", "file_tool", "names", "search_tools"]
