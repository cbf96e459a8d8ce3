from activemem_jax.envs import MathEnv, extract_final_answer, math_equal


def test_answer_extraction_and_equality():
    assert extract_final_answer("so 3+4=7\n#### 7") == "7"
    assert extract_final_answer("x = \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert extract_final_answer("\\boxed{a} then \\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert extract_final_answer("no answer") is None
    assert math_equal("1,000", "1000") and math_equal("$18.00", "18")
    assert math_equal("\\frac{1}{2}", "0.5") and math_equal("\\dfrac{3}{4}", "\\frac{3}{4}")
    assert math_equal("\\left( 3, 4 \\right)", "(3,4)")
    assert not math_equal("7", "8") and not math_equal(None, "1")
    assert math_equal("\\text{ cm}", "cm")


def test_math_env_rewards():
    env = MathEnv()
    prompts = env.reset([{"question": "1+1?", "answer": "2"}, {"question": "half?", "answer": "\\frac12"}])
    assert "1+1?" in prompts[0] and "\\boxed{answer}" in prompts[0]
    _, rewards, done, info = env.step(["It is \\boxed{2}.", "#### 0.5"])
    assert rewards == [1.0, 0.0] and done == [True, True]  # "\\frac12" is not canonical LaTeX
    assert info[1]["prediction"] == "0.5"
    assert [i["reward"] for i in info] == rewards  # the rollout reads an ended episode's reward from its info


def test_the_gold_reply_is_the_worked_solution_or_the_boxed_answer():
    env = MathEnv()
    tasks = [{"id": "g", "question": "2 + 3?", "answer": "5", "solution": "2 + 3 = 5.\n#### 5"},
             {"id": "m", "question": "1/2 + 1/4?", "answer": "\\frac{3}{4}"}]
    env.reset(tasks)
    replies = [env.expert(0, 0), env.expert(1, 0)]
    assert replies[0].endswith("#### 5") and "\\boxed{\\frac{3}{4}}" in replies[1]
    _, rewards, _, _ = env.step(replies)
    assert rewards == [1.0, 1.0]
