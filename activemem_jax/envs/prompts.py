"""The ActiveMem paper's QA prompts (Prompts 6.1 and 6.2, after MEM1)."""

MULTI_OBJECTIVE_QA = (
    "You will answer multiple complex questions using iterative reasoning, summarization, and "
    "web search. At each step, you will see the questions, a cumulative summary of relevant "
    "information, the current search query, and search results (except in the first step, where "
    "only the questions are provided). Your task is to: 1. Perform reasoning and update a "
    "cumulative, concise summary within <think> ... </think>. This acts as persistent memory and "
    "must include all essential information from previous <think> and <information> tags. 2. Then "
    "choose one of the following actions: - If any question remains unanswered, issue a single "
    "query for one question inside <search> ... </search>. The query should consist of keywords "
    "or a short phrase. Only search one question at a time. - If all questions are answered, "
    "provide the final answers\u2014separated by semicolons\u2014within <answer> answer1; answer2; "
    "... </answer>. The answers must be concise, contain only essential words, and avoid any "
    "explanations. Important: - Always follow this structure after <information> or the initial "
    "questions: <think> ... </think><search> ... </search> or <think> ... </think><answer> ... "
    "</answer>. - Do not search multiple queries or questions simultaneously. Answer the "
    "following questions:{questions}"
)

SINGLE_OBJECTIVE_QA = (
    "You will answer a complex question through iterative reasoning, summarization, and web "
    "searches. At each step, you can see the question, previous summary in <think> ... </think>, "
    "search query in <search> ... </search>, and the returned information in <information> ... "
    "</information> (except the first step where you will be given only the question). Then, you "
    "should: 1. Conduct reasoning, and then update a concise, cumulative summary with essential "
    "information inside <think> </think>. This is your persistent memory and should include all "
    "important information from previous <think> </think> and <information> </information> "
    "(i.e. information and answers already found for questions). 2. Then choose one: - Issue a "
    "query (i.e., key words / phrases for search) inside <search> </search> (you may search "
    "repeatedly until the answer is clear). This query will be used to conduct search and return "
    "the results in <information> results </information> - Provide the final concise answer (no "
    "explanations) if no additional information is needed inside <answer> </answer>. The answer "
    "should be concise and only contain the words necessary to answer the question. After "
    "<information> </information> (or question at the beginning), you should always follow the "
    "order: <think> ... </think><search> ... </search> or <think> ... </think><answer> ... "
    "</answer>. Question: {question}"
)

FORMAT_HINT = (
    "Your previous response was not valid. Reply with <think> ... </think> followed by exactly "
    "one of <search> query </search> or <answer> answer1; answer2; ... </answer>, with every "
    "tag closed."
)


def turns_left_hint(left: int) -> str:
    if left <= 1:
        return "This is your last turn: give your final answer inside <answer> </answer>."
    return f"You have {left} turns left."
