"""Rooms imported from outside: a folder of real documents (folder) and its rubric file (rubric_file)."""
