"""What is kept on disk: result records (the data at the bottom), baselines, history, the ledger."""
