"""The cached public plans of private_mean are keyed on the module constants they read: a test or
benchmark that sets a share (``monkeypatch.setattr``) gets a plan computed with it, never a stale
one from an earlier call (``mean._plan`` and ``mean_small._budget`` were keyed on the parameters only)."""

from __future__ import annotations

from fractions import Fraction

from privagg.mechanisms import mean as M
from privagg.mechanisms import mean_small as S


def test_mean_plan_follows_a_changed_share(monkeypatch) -> None:
    before = M.mean_plan(1.0, 1e-6, select_radius=True)
    assert before.eps_count == Fraction(1) * M._SHARE_COUNT
    monkeypatch.setattr(M, "_SHARE_COUNT", M._SHARE_COUNT / 2)
    after = M.mean_plan(1.0, 1e-6, select_radius=True)
    assert after.eps_count == before.eps_count / 2  # stale cache: equal to before


def test_coordinate_budget_follows_changed_shares(monkeypatch) -> None:
    before = S.coordinate_budget(1.0, 1e-6, 3)
    monkeypatch.setattr(M, "_SHARE_COUNT", M._SHARE_COUNT / 2)  # read by the budget from mean.py
    assert S.coordinate_budget(1.0, 1e-6, 3).eps_n == before.eps_n / 2
    monkeypatch.setattr(S, "COORD_SHARE_OUTSIDE", S.COORD_SHARE_OUTSIDE * 2)
    assert S.coordinate_budget(1.0, 1e-6, 3).eps_out == before.eps_out * 2
