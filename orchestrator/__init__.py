"""goldenloop's golden loop: decompose, execute, verify, commit, reflect and retry."""
