"""pipesim against published training runs: the rows, the predictions, and validation by source left out."""
