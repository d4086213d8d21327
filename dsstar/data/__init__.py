"""The data side: where input files come from (sources, lake/), what they hold (profiler/,
catalog), what they promise (contracts/), and which of them matter to a question (retrieval/)."""
