"""Autograde on submit: ``autograder serve``, a web service students submit notebooks to.

Two processes, never one: the **web** process (``web.py``: the application and authentication by the
JupyterHub or by course tokens; ``pages.py`` and ``api.py``, the pages and the JSON API, on ``handlers.py``;
``views.py``, what they show) only reads and writes the **queue** (``store.py`` on ``schema.py``); the
**worker** process (``worker.py``) takes queued submissions and grades them with the batch engine
(``autograder.grading``) in a private workspace (``workspace.py``), so no request is ever served by a
process that runs student code, and the course gradebook is never written before the instructor grades.
``intake.py`` decides what is accepted (``policy.py``: dates, rate limits, feedback levels) and lands
accepted notebooks in nbgrader's ``submitted/`` (``landing.py``); ``serve.py`` runs both processes.
"""
