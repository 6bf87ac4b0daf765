"""Grades out of nbgrader's gradebook into a learning management system: Canvas through its REST API
(``canvas``: preview, then apply) and Canvas's gradebook import CSV (``import_csv``), for staff without
an API token. The gradebook stays the system of record: nothing here writes to it."""
