"""The data side: where input files come from (sources, lake/), what they hold (profiler/,
catalog), what they promise (contracts/), and which of them matter to a question (retrieval/)."""

# The public names of this package are its modules, imported where they are used (several
# pull in heavy libraries that most commands never need).
__all__ = [
    "catalog",
    "contracts",
    "lake",
    "profiler",
    "retrieval",
    "sources",
]
