"""The commands, each imported only when it runs: `do-one-task` and `overnight`."""
