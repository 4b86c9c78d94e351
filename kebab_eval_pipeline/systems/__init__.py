"""Systems under test: one module per kind (kinds/), the adapters that call them, and the wire format
and mapping language that read what they return."""
