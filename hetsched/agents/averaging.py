"""A uniform average of the network's weights over behaviour-cloning rounds (SWA-style).

Consecutive DAgger rounds of one run differ by up to 0.1 in validation IQM, so choosing the best
round of a run favours a lucky one. The average of the weights after rounds
``bc.average_from`` .. last (stochastic weight averaging, Izmailov et al., UAI 2018, over the
rounds of one run, which follow one another on one optimizer trajectory) is one network,
chosen by no score. :class:`WeightAverage` keeps the running mean; the trainer writes it as
``checkpoints/bc_avg.pt`` after every averaged round and stores it in every checkpoint, so
``resume=`` continues it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor


class WeightAverage:
    """Running uniform mean of state dicts (floating tensors; others are the latest's)."""

    def __init__(self) -> None:
        self.n = 0
        self.rounds: list[int] = []
        self._mean: dict[str, Tensor] = {}

    def add(self, state: Mapping[str, Tensor], round_index: int) -> None:
        """Fold in the weights after behaviour-cloning round ``round_index``.

        Raises:
            ValueError: If the state dict's keys or shapes differ from the ones averaged so far.
        """
        if self.n and (
            set(state) != set(self._mean)
            or any(state[k].shape != self._mean[k].shape for k in state)
        ):
            raise ValueError("the weights to average have another layout than the earlier ones")
        self.n += 1
        for k, v in state.items():
            v = v.detach().to("cpu")
            if self.n == 1 or not v.is_floating_point():
                self._mean[k] = v.clone()
            else:
                self._mean[k] += (v - self._mean[k]) / self.n
        self.rounds.append(int(round_index))

    def state_dict(self) -> dict[str, Tensor]:
        """The averaged weights (a copy)."""
        return {k: v.clone() for k, v in self._mean.items()}

    def to_payload(self) -> dict[str, Any]:
        """Plain data for a checkpoint (tensors, ints and lists only: ``weights_only`` loads)."""
        return {"n": self.n, "rounds": list(self.rounds), "mean": self.state_dict()}

    @classmethod
    def from_payload(cls, d: Mapping[str, Any]) -> WeightAverage:
        """The average stored by :meth:`to_payload` (an empty one for ``{}``)."""
        avg = cls()
        if d:
            avg.n = int(d["n"])
            avg.rounds = [int(r) for r in d["rounds"]]
            avg._mean = {str(k): torch.as_tensor(v) for k, v in dict(d["mean"]).items()}
        return avg
