"""The report's cost section: prices, USD per trajectory and per policy, the root's token share, two figures.

Prices come from config (``models.<role>.usd_per_mtok_in/out``) through the
warehouse table model_prices; the numbers from the marts. With every price 0
(the embedded default) the section says so: 0 USD is the cost, not a gap.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.report import cost_plots
from pipeline.report.formatting import MISSING, pct
from pipeline.report.render import Image, Section, Table


def usd(v: float | None) -> str:
    return MISSING if v is None else f"{float(v):.4f}"


def cost_section(
    prices: list[dict],
    embedded: list[str],
    summaries: list[dict],
    room_rows: list[dict],
    labels: dict[str, str],
    out: Path,
) -> tuple[Section, list[Path]]:
    s = Section("Cost")
    pngs: list[Path] = []
    all_free = not any(p["usd_per_mtok_in"] or p["usd_per_mtok_out"] for p in prices)
    if all_free and embedded:
        s.blocks.append(
            f"Every model is priced at 0 USD ({', '.join(embedded)}): the embedded models run on this "
            "machine and have no per-token price, so each cost below is 0 by construction, not missing. "
            "Set models.<role>.usd_per_mtok_in / usd_per_mtok_out to price served models."
        )
    elif all_free:
        s.blocks.append(
            "No model has a price (models.<role>.usd_per_mtok_in / usd_per_mtok_out are 0): every cost "
            "below is 0 until prices are set."
        )
    if prices:
        s.blocks.append(
            Table(
                ["model", "role", "USD / M input tokens", "USD / M output tokens"],
                [
                    [p["model"], p["role"], usd(p["usd_per_mtok_in"]), usd(p["usd_per_mtok_out"])]
                    for p in prices
                ],
                "Prices the marts use (table model_prices, from the config of the last sample or report command).",
            )
        )
    if summaries:
        s.blocks.append(
            Table(
                [
                    "policy",
                    "purpose",
                    "trajectories",
                    "mean cost (USD)",
                    "total cost (USD)",
                    "root share of input tokens",
                    "root share of output tokens",
                ],
                [
                    [
                        labels.get(r["policy_id"], r["policy_id"]),
                        r["purpose"],
                        str(r["n_trajectories"]),
                        usd(r.get("cost_usd")),
                        usd(r.get("total_cost_usd")),
                        pct(r.get("root_share_in")),
                        pct(r.get("root_share_out")),
                    ]
                    for r in summaries
                ],
                "Cost per trajectory at those prices (policy_summary); cost per accepted example: the rejection filter's table.",
            )  # fmt: skip
        )
    p = cost_plots.score_vs_cost(room_rows, labels, out / "score_vs_cost.png", all_free)
    if p:
        pngs.append(p)
        s.blocks.append(
            Image(
                p,
                "Mean headline score vs mean cost per trajectory, per room and policy (Figure 8 of the reference report).",
            )
        )
    p = cost_plots.root_token_share(summaries, labels, out / "root_token_share.png")
    if p:
        pngs.append(p)
        s.blocks.append(
            Image(
                p,
                "The root's share of input and output tokens per policy (Figure 9a of the reference report).",
            )
        )
    if len(s.blocks) == (1 if all_free else 0):
        s.blocks.append("No trajectories yet.")
    return s, pngs
