"""Planted diligence issues and decoys: every kind the generator can plant, with its builder.

Each builder writes one issue's documents into the room under construction
(pipeline.rooms.synthetic.context.Ctx), with the issue's clause buried among
ordinary sections, and adds the issue's atomic criteria (identify / cite /
quantify / connect / conflict / absence / next_step) through the shared blocks of
pipeline.rooms.synthetic.criteria. Builders are grouped by family: contracts,
liabilities, employment, decoys.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.rooms.synthetic.context import Ctx
from pipeline.rooms.synthetic.issues.contracts import (
    amendment_coc,
    anti_assignment,
    coc_termination,
    exclusivity_affiliates,
    lease_landlord_consent,
    mfn,
    missing_side_letter,
    uncapped_indemnity,
    value_conflict,
)
from pipeline.rooms.synthetic.issues.decoys import (
    decoy_coc_deleted,
    decoy_consent_waived,
    decoy_debt_repaid,
    decoy_fees_agree,
    decoy_litigation_dismissed,
    decoy_permit_renewed,
    decoy_side_letter_filed,
)
from pipeline.rooms.synthetic.issues.employment import exec_cic_payment, missing_ip_assignment
from pipeline.rooms.synthetic.issues.liabilities import (
    debt_coc_default,
    expired_permit,
    pending_litigation,
    tax_assessment,
    unreported_breach,
)

Builder = Callable[[Ctx, str], None]

# documents each builder adds, which the planner budgets; a kind is its builder's name
_ISSUE_COSTS: dict[int, list[Builder]] = {
    1: [
        coc_termination,
        anti_assignment,
        exclusivity_affiliates,
        mfn,
        uncapped_indemnity,
        debt_coc_default,
        pending_litigation,
        exec_cic_payment,
        lease_landlord_consent,
        expired_permit,
        unreported_breach,
        tax_assessment,
    ],
    2: [amendment_coc, missing_side_letter, value_conflict],
    3: [missing_ip_assignment],
}
_DECOYS = [
    decoy_coc_deleted,
    decoy_consent_waived,
    decoy_debt_repaid,
    decoy_fees_agree,
    decoy_litigation_dismissed,
    decoy_permit_renewed,
    decoy_side_letter_filed,
]

# kind -> (builder, documents it adds); the planner sorts the kinds, so this order is free
ISSUES: dict[str, tuple[Builder, int]] = {b.__name__: (b, n) for n, bs in _ISSUE_COSTS.items() for b in bs}
DECOYS: dict[str, tuple[Builder, int]] = {b.__name__: (b, 2) for b in _DECOYS}
