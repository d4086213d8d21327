"""What a run is given: the form of its settings (form), which of them a form may set (trust),
the checks that refuse a run before it costs anything (preflight), and question sets
(questions)."""

# The public names of this package are its modules, imported where they are used (several
# pull in heavy libraries that most commands never need).
__all__ = ["form", "preflight", "questions", "trust"]
