"""Running untrusted code and stopping cleanly: the sandbox for generated scripts (sandbox/),
why a failed script failed, in one line (failure), temporary folders that never outlive their
process (scratch), and SIGINT/SIGTERM handling that leaves no child behind (stopping)."""

# The public names of this package are its modules, imported where they are used (several
# pull in heavy libraries that most commands never need).
__all__ = [
    "failure",
    "sandbox",
    "scratch",
    "stopping",
]
