"""GRPO whose update reads each micro-batch's shared prompt once, and no padding.

TRL 1.16 runs every micro-batch through the model as a padded rectangle: the
generation batch is padded to its longest prompt (left) and its longest
completion (right), and every row of every micro-batch carries that width.
The 8 rollouts of a ``make rl`` step are 2 rooms x 4; the 4 of a room share
their whole prompt (system prompt, worked example, task: about 1,260 tokens),
and the two rooms share most of it. Measured on the six steps of a ``make rl``
run (docs/rl.md): 85,216 tokens went through the model, of which 71,651 were
real and 27,056 distinct (each group's prompt once, plus its completions).

``SharedPrefixPacking`` is GRPOTrainer with two changes:

- a micro-batch is packed into one sequence shaped as a tree: the prompt
  tokens every row shares (the trunk) once, then each row's branch (the rest
  of its prompt, then its completion), padding dropped. ``tree_attention``
  (registered with transformers as the model's attention implementation; sdpa
  outside packed passes) runs the trunk causally and each branch on the trunk
  and itself, never another branch; a branch's positions continue from the
  trunk, as in its own sequence. Every completion token is therefore scored on
  exactly the context it had in its own row, so log-probabilities, entropies
  and the loss agree with TRL's to float rounding
  (tests/training/test_shared_prefix.py compares them, and the update of a
  step, on a real model). A pass holds at most ``max_completion_length``
  tokens (``rl.max_length``, the longest rollout the update takes): rows that
  would go past it start another pass, so memory stays that of one rollout;
- the rollouts of the generation batch are ordered so that rows with the same
  prompt are adjacent before they are cut into micro-batches (TRL shuffles
  them). With one optimiser step per generation batch the order changes
  nothing but which rows share a pass: gradients are summed over the whole
  batch, and the DAPO token normaliser spans the generation batch.

A trunk ends one token short of the shortest row's prompt, so every branch
holds the token that predicts its first completion token. Micro-batches with
nothing to pack (multimodal inputs, an MoE auxiliary loss) go through TRL's own
path unchanged, and a model whose attention is not sdpa is not packed at all
(``pack_reason`` says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from trl import GRPOTrainer
from trl.trainer.utils import split_tensor_dict

# The attention implementation the packing trainer gives its model: sdpa, except in a packed pass.
TREE_ATTENTION = "tree_sdpa"

# Loss types whose loss changes when rows move between micro-batches (every other TRL 1.16 type divides by
# a per-row length, a constant or the generation batch's token count, so packing is exact for them).
NOT_REGROUPABLE = ("bnpo",)

# Keyword arguments of _get_per_token_logps_and_entropies that only multimodal models pass.
_MULTIMODAL = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)


@dataclass(frozen=True)
class Tree:
    """Where the trunk and the branches lie in a packed sequence (branch i: positions [start, end))."""

    trunk: int
    branches: tuple[tuple[int, int], ...]


@dataclass
class Packed:
    """Some rows of a micro-batch as one tree-shaped sequence (tensors 1-D over the packed length)."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    shift_labels: torch.Tensor  # the next token a position predicts, -100 where nothing is scored
    tree: Tree
    rows: torch.Tensor  # for each scored position: its row in the micro-batch ...
    cols: torch.Tensor  # ... its column among the completion's logits_to_keep ...
    sources: torch.Tensor  # ... and the packed position whose output scores it

    @property
    def length(self) -> int:
        return int(self.input_ids.numel())

    def allowed(self) -> torch.Tensor:
        """(L, L) bool: may position q attend to position k (what tree_attention computes)."""
        seg = torch.full((self.length,), -1)
        for i, (start, end) in enumerate(self.tree.branches):
            seg[start:end] = i
        index = torch.arange(self.length)
        # Causal, and a branch sees the trunk and itself only (branches follow the trunk).
        return (index[None, :] <= index[:, None]) & ((seg[None, :] == -1) | (seg[None, :] == seg[:, None]))


def _common_prefix(rows: list[torch.Tensor]) -> int:
    shortest = min(len(r) for r in rows)
    first = rows[0][:shortest]
    same = torch.ones(shortest, dtype=torch.bool, device=first.device)
    for r in rows[1:]:
        same &= r[:shortest] == first
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else shortest


def _trunk(prompts: list[torch.Tensor]) -> int:
    # The trunk stops one token short of the shortest prompt: that token starts every branch and
    # predicts the branch's first completion token.
    return min(_common_prefix(prompts), min(len(p) for p in prompts) - 1)


def _split_rows(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int
) -> tuple[list[torch.Tensor], list[torch.Tensor]] | None:
    """Each row's prompt and completion without padding, or None when a row is not in TRL's layout."""
    cut = input_ids.size(1) - logits_to_keep
    prompts, completions = [], []
    for ids, mask in zip(input_ids, attention_mask.bool(), strict=True):
        p_mask, c_mask = mask[:cut], mask[cut:]
        n_p, n_c = int(p_mask.sum()), int(c_mask.sum())
        # Left padding then prompt, completion then right padding: anything else is not TRL's layout.
        if n_p == 0 or not bool(p_mask[cut - n_p :].all()) or not bool(c_mask[:n_c].all()):
            return None
        prompts.append(ids[cut - n_p : cut])
        completions.append(ids[cut : cut + n_c])
    return prompts, completions


def _pack_rows(rows: list[int], prompts: list[torch.Tensor], completions: list[torch.Tensor]) -> Packed:
    trunk = _trunk([prompts[i] for i in rows])
    pieces, positions = [prompts[rows[0]][:trunk]], [torch.arange(trunk)]
    labels = [torch.full((trunk,), -100, dtype=torch.long)]
    branches, out_rows, cols, sources = [], [], [], []
    start = trunk
    for i in rows:
        p, c = prompts[i], completions[i]
        branch = torch.cat([p[trunk:], c])
        n, lead = len(branch), len(p) - trunk  # lead: the branch's prompt tokens (>= 1)
        label = torch.full((n,), -100, dtype=torch.long)
        label[lead - 1 : n - 1] = c.cpu()  # position j predicts branch[j + 1]
        pieces.append(branch)
        positions.append(torch.arange(trunk, trunk + n))  # as in the row's own sequence
        labels.append(label)
        branches.append((start, start + n))
        out_rows.append(torch.full((len(c),), i))
        cols.append(torch.arange(len(c)))
        sources.append(torch.arange(start + lead - 1, start + lead - 1 + len(c)))
        start += n
    device = prompts[0].device
    return Packed(
        input_ids=torch.cat(pieces).to(device),
        position_ids=torch.cat(positions).to(device),
        shift_labels=torch.cat(labels).to(device),
        tree=Tree(trunk, tuple(branches)),
        rows=torch.cat(out_rows).to(device),
        cols=torch.cat(cols).to(device),
        sources=torch.cat(sources).to(device),
    )


def pack(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int, max_tokens: int
) -> list[Packed] | None:
    """A padded micro-batch as tree-shaped sequences of at most ``max_tokens`` tokens, or None.

    ``input_ids``/``attention_mask`` are TRL's ``cat(prompt, completion)``: prompts left-padded,
    completions (the last ``logits_to_keep`` columns) right-padded. Consecutive rows share a sequence
    while it stays within ``max_tokens`` (a longer row gets one of its own), so a pass never needs
    more memory than its longest rollout, or ``max_tokens``. None when a prompt is empty or a mask
    has a hole: then the rectangle is run as TRL runs it.
    """
    split = _split_rows(input_ids, attention_mask, logits_to_keep)
    if split is None:
        return None
    prompts, completions = split
    trunk = _trunk(prompts)  # every chunk's own trunk is at least this long
    chunks: list[list[int]] = [[]]
    size = trunk
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        extra = len(p) + len(c) - trunk
        if chunks[-1] and size + extra > max_tokens:
            chunks.append([])
            size = trunk
        chunks[-1].append(i)
        size += extra
    return [_pack_rows(rows, prompts, completions) for rows in chunks]


def tree_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    tree: Tree | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """sdpa attention; in a packed pass (``tree`` given), the trunk causally, then each branch on trunk + itself.

    One sdpa call over the whole packed sequence with a 4-D mask would compute every query against
    every key and mask most of them away (measured on CPU: twice the time of causal attention at 2,600
    tokens); here each branch's queries meet only the keys they may see.
    """
    if tree is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    t = tree.trunk
    parts = []
    if t:
        parts.append(
            F.scaled_dot_product_attention(
                query[:, :, :t],
                key[:, :, :t],
                value[:, :, :t],
                is_causal=True,
                dropout_p=dropout,
                scale=scaling,
            )
        )
    for start, end in tree.branches:
        q = query[:, :, start:end]
        k = torch.cat([key[:, :, :t], key[:, :, start:end]], dim=2)
        v = torch.cat([value[:, :, :t], value[:, :, start:end]], dim=2)
        # Query j of the branch sees the whole trunk and branch keys 0..j: key column c <= t + j.
        mask = torch.ones(end - start, t + end - start, dtype=torch.bool, device=query.device).tril(
            diagonal=t
        )
        parts.append(
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=scaling)
        )
    return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None


AttentionInterface.register(TREE_ATTENTION, tree_attention)
AttentionMaskInterface.register(TREE_ATTENTION, sdpa_mask)  # outside packed passes: sdpa's own masks


def prompt_order(batch: dict[str, Any]) -> list[int]:
    """Row order of a generation batch that puts rows with the same prompt next to each other."""
    ids, mask = batch["prompt_ids"], batch["prompt_mask"].bool()
    keys = [tuple(row[m].tolist()) for row, m in zip(ids, mask, strict=True)]
    return sorted(range(len(keys)), key=lambda i: (keys[i], i))


def _merge(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, first in chunks[0].items():
        if isinstance(first, torch.Tensor) and first.ndim > 0:
            out[key] = torch.cat([c[key] for c in chunks])
        elif isinstance(first, list):
            out[key] = [x for c in chunks for x in c[key]]
        else:  # None, or a 0-d tensor every chunk shares (num_items_in_batch)
            out[key] = first
    return out


def _permute(batch: dict[str, Any], order: list[int]) -> dict[str, Any]:
    index = torch.tensor(order)
    out: dict[str, Any] = {}
    for key, v in batch.items():
        if isinstance(v, torch.Tensor) and v.ndim > 0:
            out[key] = v[index.to(v.device)]
        elif isinstance(v, list):
            out[key] = [v[i] for i in order]
        else:
            out[key] = v
    return out


def group_by_prompt(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """TRL's micro-batches of one generation batch, re-cut so that rows with one prompt share a micro-batch."""
    whole = _merge(chunks)
    return split_tensor_dict(_permute(whole, prompt_order(whole)), len(chunks))


class SharedPrefixPacking(GRPOTrainer):
    """GRPOTrainer whose forward passes read a micro-batch's shared prompt once and skip padding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A pass holds at most the longest rollout the update takes (rl.max_length), so packing never
        # needs more memory than one such rollout did.
        self.pack_max_tokens = int(self.args.max_completion_length or 4096)
        # Of the current generation batch's passes: the tokens run through the model, and what TRL's
        # padded rectangles of the same passes would have run.
        self.packed_tokens = 0
        self.padded_tokens = 0
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        implementation = getattr(base.config, "_attn_implementation", None)
        self.pack_reason = None
        if self.loss_type in NOT_REGROUPABLE:
            # Packing regroups the batch's rows by prompt before cutting micro-batches; bnpo divides each
            # micro-batch's loss by that micro-batch's own token count, so regrouping would change it.
            self.pack_reason = f"loss_type {self.loss_type} normalises by each micro-batch's tokens"
        elif implementation == "sdpa":
            base.set_attn_implementation(TREE_ATTENTION)  # sdpa itself outside packed passes
        elif implementation != TREE_ATTENTION:
            self.pack_reason = f"attention implementation {implementation!r} (packing needs sdpa)"

    def _prepare_inputs(self, generation_batch: dict[str, Any]) -> dict[str, Any]:
        buffered = self._buffered_inputs
        inputs = super()._prepare_inputs(generation_batch)
        if self.pack_reason is None and self.model.training and self._buffered_inputs is not buffered:
            # A new generation batch was just cut into micro-batches: re-cut it by prompt.
            self._buffered_inputs = group_by_prompt(self._buffered_inputs)
            self.packed_tokens = self.padded_tokens = 0
            inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
        return inputs

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        packable = (
            self.pack_reason is None
            and not compute_aux_loss
            and all(multimodal.get(k) is None for k in _MULTIMODAL)
            and not set(multimodal) - set(_MULTIMODAL)
        )
        if not packable:
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **multimodal,
            )
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            ids, mask = input_ids[start : start + batch_size], attention_mask[start : start + batch_size]
            self.padded_tokens += ids.numel()
            packs = pack(ids, mask, logits_to_keep, self.pack_max_tokens)
            if packs is None:
                self.packed_tokens += ids.numel()
                out = super()._get_per_token_logps_and_entropies(
                    model, ids, mask, logits_to_keep, compute_entropy=compute_entropy
                )[:2]
            else:
                out = self._packed_passes(model, packs, ids.size(0), logits_to_keep, compute_entropy)
            logps.append(out[0])
            entropies.append(out[1])
        return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

    def _packed_passes(
        self, model, packs: list[Packed], n_rows: int, logits_to_keep: int, compute_entropy: bool
    ):
        logps = entropy = None
        for packed in packs:
            self.packed_tokens += packed.length
            with self.accelerator.autocast():
                outputs = model(
                    input_ids=packed.input_ids[None],
                    position_ids=packed.position_ids[None],
                    shift_labels=packed.shift_labels[None],
                    fused_lm_head=True,
                    tree=packed.tree,  # reaches tree_attention in every layer
                )
            # Each scored position goes back to its (row, completion column); the rest stays 0, as TRL's
            # fused head leaves unscored positions.
            where = (packed.rows, packed.cols)
            if logps is None:
                logps = outputs.log_probs.new_zeros((n_rows, logits_to_keep))
            logps = logps.index_put(where, outputs.log_probs[0, packed.sources])
            if compute_entropy:
                if entropy is None:
                    entropy = outputs.entropy.new_zeros((n_rows, logits_to_keep))
                entropy = entropy.index_put(where, outputs.entropy[0, packed.sources])
        return logps, entropy


def trainer_class(pack_shared_prefix: bool, skip_flat_groups: bool) -> type[GRPOTrainer]:
    """GRPOTrainer with the sampler correction (pipeline.training.importance) and the update savings the
    config turns on (each is exact; they compose)."""
    from pipeline.training.flat_groups import FlatGroupSkipping
    from pipeline.training.importance import SamplerCorrection

    bases = [
        c
        for c, on in ((SharedPrefixPacking, pack_shared_prefix), (FlatGroupSkipping, skip_flat_groups))
        if on
    ]
    return type("RootGRPOTrainer", (SamplerCorrection, *bases), {})
