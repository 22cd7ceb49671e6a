"""toytrain: the smallest trainer of your own that `gantry run -- -m toytrain.train` runs on the nodes."""
