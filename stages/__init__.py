"""The stages, one file each; ``STAGES`` is their one list, in the order a round runs them."""

STAGES = ["rooms", "sample", "grade", "filter", "dataset", "train", "rl", "evaluate", "report"]
