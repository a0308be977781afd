"""Errors of the training chain (filter -> dataset -> train) that a user can fix.

All are ``UserError``s: the CLI prints their message as one line and exits 1.
``NoAcceptedTrajectories`` lives here once, because both the filter (nothing
passed its rules) and the dataset builder (the selection accepted nothing, or
nothing that fits ``dataset.max_length``) raise it.
"""

from __future__ import annotations

from pipeline.errors import UserError


class DatasetError(UserError):
    """No dataset can be built from what the warehouse holds."""


class NoSelectionError(DatasetError):
    """No selection to build from (the filter stage has not run, or dataset.selection_id is wrong)."""


class NoAcceptedTrajectories(DatasetError):
    """Nothing to train on: the filter accepted nothing, or nothing accepted fits dataset.max_length."""


class TrainError(UserError):
    """Nothing to train on, or a dataset that does not fit the trainer."""


class FilterJudgeError(UserError):
    """filter.judge names no judge, or a judge that graded none of the training trajectories."""
