"""One module per schema revision of the ledger."""
