"""The golden loop: one task start to finish, one subtask's attempts, the plan and its saved
state, the prompt each attempt gets, decomposition and escalation."""
