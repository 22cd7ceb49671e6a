"""What the verbs call that takes more than one part: where apply places the nodes, preflight before it, an
image to the registry."""
