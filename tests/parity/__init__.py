"""The nbgrader parity suite's harness, scenarios and golden results (see harness.py)."""
