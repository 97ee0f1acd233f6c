"""HumanEval with goldenloop: problems as repositories, three retry modes, one table."""
