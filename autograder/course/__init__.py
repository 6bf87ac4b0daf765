"""The course model every command stands on: ``course.toml`` (``manifest``), the exercises' sources and
their markers (``source``), the nbgrader course folder and gradebook (``nbgrader``), and the settings
model the commands' flags and tables come from (``settings``).

Nothing here grades, renders or serves; everything else in the package imports from here.
"""
