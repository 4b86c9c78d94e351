"""Golden sets: the model of a golden query and its supports, the readers of every format, loading,
validation, conversion, and `golden record`."""
