"""One error hierarchy for the training chain; every error in it is printed as one line by the CLI."""

from __future__ import annotations

import pytest

from pipeline.errors import UserError, is_user_facing
from pipeline.training import errors
from pipeline.training.selection import Selection, require_accepted


@pytest.mark.parametrize(
    "cls", [errors.DatasetError, errors.NoSelectionError, errors.NoAcceptedTrajectories, errors.TrainError]
)
def test_training_errors_are_user_facing(cls):
    assert issubclass(cls, UserError) and is_user_facing(cls("x"))


def test_filter_and_dataset_share_no_accepted_trajectories():
    # The dataset stage's callers catch DatasetError; the filter's zero-accepted error is the same class.
    assert issubclass(errors.NoAcceptedTrajectories, errors.DatasetError)
    with pytest.raises(errors.NoAcceptedTrajectories, match="0 of 3"):
        require_accepted(Selection("sel-x", reused=False, reasons={"score": 2, "coverage": 1}))
    require_accepted(Selection("sel-y", reused=True, reasons={"accepted": 1}))


def test_selection_counts():
    s = Selection("sel-z", reused=False, reasons={"accepted": 2, "top_k": 1})
    assert s.counts() == {
        "selection_id": "sel-z",
        "reused": False,
        "reasons": {"accepted": 2, "top_k": 1},
        "accepted": 2,
        "considered": 3,
    }
