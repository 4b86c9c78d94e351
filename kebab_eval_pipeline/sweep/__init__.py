"""Configuration sweeps: a grid over run settings expanded into variants (each a normal run with a
``sweep-<name>-<variant>`` run id), and the leaderboard ranking the variants' stored runs."""
