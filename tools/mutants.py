#!/usr/bin/env python3
"""``make mutants``: apply a fixed list of privacy-critical mutations one at a time and fail if
any survives.

Each mutation replaces one exact snippet (which must occur exactly once) in a *temporary copy*
of ``src/`` — the working tree is never edited — and runs only the tests meant to kill it, with
``PYTHONPATH`` pointing at the mutated copy (checked: ``privagg`` must import from the copy). A
mutation is *killed* when those tests fail (pytest exit status 1); it *survives* when they pass.
A baseline run of the same tests on an unmutated copy comes first, so that a kill means
something. Prints a table: mutation → killed/survived → the first failing test.

Usage: python tools/mutants.py [--list] [--only ID[,ID...]] [--no-baseline] [--timeout S]
Exit status: 0 when every mutation is killed, 1 otherwise (or when the baseline fails).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = ["-m", "pytest", "-q", "-x", "-rfE", "-p", "no:cacheprovider", "-n", "0", "--no-header"]


@dataclass(frozen=True)
class Mutation:
    id: str
    item: str  # what it stands for (the review item of issue 15 it answers, or "original five")
    path: str  # relative to src/privagg
    old: str
    new: str
    tests: tuple[str, ...]


H = "mechanisms/histogram.py"
T = "tests/mechanisms/"
FC = "tests/friendlycore/"
TP = "tests/friendlycore/test_fc_mean_coordinate_two_pass.py::"
TC = "tests/friendlycore/test_fc_mean_continuation.py::"
TA = "tests/aggregate/"
GB = "mechanisms/grouped_bounded.py"
GQ = "mechanisms/grouped_quantile.py"
GM = "mechanisms/grouped_mean.py"
AG = "mechanisms/aggregate.py"
EG = "engines/grouped.py"

MUTATIONS: tuple[Mutation, ...] = (
    # ---- the five privacy-critical mutations the review tried
    Mutation("stable-ge", "five: >= → > at the stable threshold", H,
             "keep = noisy >= params.threshold  # ≥", "keep = noisy > params.threshold  # ≥",
             (T + "test_hist_known_answers.py::test_key_with_noisy_count_exactly_T_is_kept_and_T_minus_1_is_not",)),
    Mutation("randomized-boundary-value", "threshold=\"randomized\": the coin at T − 2 instead of T − 1", H,
             "keep |= (noisy == params.threshold - 1) &", "keep |= (noisy == params.threshold - 2) &",
             (T + "test_hist_randomized.py::test_boundary_value_kept_at_rate_b",)),
    Mutation("randomized-boundary-index", "threshold=\"randomized\": b computed one step too low", H,
             "return DiscreteLaplace(scale).boundary_probability(threshold - linf, per_key_delta(delta, l0))",
             "return DiscreteLaplace(scale).boundary_probability(threshold - linf - 1, per_key_delta(delta, l0))",
             (T + "test_hist_randomized.py::test_boundary_probability_known_answers",)),
    Mutation("randomized-coins-at-boundary-only", "threshold=\"randomized\": coins drawn only for T − 1 keys",
             H, "size=counts.shape[0], rng=rng)\n    return noisy, keep & (counts > 0)",
             "size=counts.shape[0], rng=rng) if (noisy == params.threshold - 1).any() else False\n"
             "    return noisy, keep & (counts > 0)",
             (T + "test_hist_randomized.py::test_coins_drawn_for_every_key_whatever_the_counts",)),
    Mutation("randomized-zero-count-kept", "threshold=\"randomized\": count-0 keys kept by the coin", H,
             "    return noisy, keep & (counts > 0)",
             "    keep = keep | ((noisy == params.threshold - 1) & (counts == 0))\n    return noisy, keep & (counts >= 0)",
             (T + "test_hist_randomized.py::test_zero_count_keys_never_kept_at_T_minus_1",)),
    Mutation("replace-sensitivity", "five: replace-one sensitivity 2 → 1", H,
             '_SENSITIVITY = {"replace": 2, "add_remove": 1}', '_SENSITIVITY = {"replace": 1, "add_remove": 1}',
             (T + "test_hist_known_answers.py",)),
    Mutation("filter-keep-half", "five, and fc_filter ~166: BasicFilter keeps c = n/2", "friendlycore/filter.py",
             "num = np.clip((2 * c - n) * np.int64(b), 0, den)",
             "num = np.clip((2 * c - n + 1) * np.int64(b), 0, den)",
             (FC + "test_fc_filter.py::test_p2_negative_control_threshold_minus_one",)),
    Mutation("conversion-L", "five: conversion constant L without its factor 2", "friendlycore/conversion.py",
             "return 2 * (1 - alpha) / (1 - 2 * alpha) + alpha", "return (1 - alpha) / (1 - 2 * alpha) + alpha",
             (FC + "test_fc_conversion.py",)),
    Mutation("ledger-check-then-write", "five: ledger checks and writes in two transactions",
             "accounting/ledger.py",
             "        with self._write() as conn:\n            eps, dlt, count = self._spent_row(conn)\n",
             "        with self._read() as rconn:\n            eps, dlt, count = self._spent_row(rconn)\n"
             "        time.sleep(0.02)  # the gap of the harness's own racy worker\n"
             "        with self._write() as conn:\n",
             ("tests/accounting/test_ledger_processes.py::test_race_exactly_the_allowed_number_of_charges",)),
    # ---- assertions that could not fail
    Mutation("filter-int32", "fc_filter ~56: dead n = 10**9 case → exact large products", "friendlycore/filter.py",
             "num = np.clip((2 * c - n) * np.int64(b), 0, den)",
             "num = np.clip(((2 * c - n).astype(np.int32) * np.int32(b)).astype(np.int64), 0, den)",
             (FC + "test_fc_filter.py::test_keep_probabilities_exact_with_large_products",)),
    Mutation("laplace-bound-no-union", "hist_properties ~81: 0 <= error_bound → exact bound", H,
             "return _abs_quantile_all(t, m, beta) / self.n", "return _abs_quantile(t, beta) / self.n",
             (T + "test_hist_properties.py::test_laplace_release_shapes_dtypes_alignment",)),
    Mutation("stable-bound-no-union", "hist_properties ~101: <= inf under replace → exact bound", H,
             "return (self.threshold - 1 + _abs_quantile_all(t, self.n, beta)) / self.n",
             "return (self.threshold - 1 + _abs_quantile(t, beta)) / self.n",
             (T + "test_hist_properties.py::test_stable_release_keys_are_present_sorted_and_above_threshold",)),
    Mutation("empty-replace-accepted", "hist_properties ~69/92: empty data under replace must raise", H,
             'if neighbors == "replace" and key_counts.n == 0:', "if False:",
             (T + "test_hist_properties.py",)),
    Mutation("mean-cli-wrong-name", "fc_mean_cli ~121: the error line names the parameter", "cli/mean.py",
             'dlt = number_option(WHERE, "delta", delta, _validate.check_delta)',
             'dlt = number_option(WHERE, "epsilon", delta, _validate.check_delta)',
             (FC + "test_fc_mean_cli.py::test_cli_bad_input_exit_2_one_line",)),
    Mutation("duckdb-no-memory-limit", "duckdb ~73: the memory limit takes effect and DuckDB spills",
             "engines/duckdb.py", 'con.sql("SET enable_progress_bar = false")',
             'con.sql("SET enable_progress_bar = false")\n    con.sql("RESET memory_limit")',
             ("tests/engines/test_duckdb_engine.py::test_group_by_spills_to_disk_under_a_small_memory_limit",)),
    Mutation("kmeans-zero-distance-far", "fc_kmeans ~244: a row on its center lands in the innermost bin",
             "mechanisms/kmeans.py", "np.maximum(dist, np.finfo(float).tiny)", "np.where(dist > 0, dist, np.inf)",
             (FC + "test_fc_kmeans.py::test_lloyd_step_with_rows_exactly_on_their_centers",)),
    # ---- statistical tests without power
    Mutation("laplace-ar-bound-2x-loose", "hist_statistical ~247: add/remove bound 2× loose", H,
             "return (k + s) / total if total > s else math.inf",
             "return 2 * (k + s) / total if total > s else math.inf",
             (T + "test_hist_statistical.py::test_laplace_add_remove_frequency_bound_is_the_exact_formula",)),
    Mutation("laplace-ar-bound-no-split", "hist_statistical ~247: add/remove bound without the β split", H,
             "            k = _abs_quantile_all(t, m, beta / 2)\n            s = _sum_abs_quantile(t, m, beta / 2)",
             "            k = _abs_quantile_all(t, m, beta)\n            s = _sum_abs_quantile(t, m, beta)",
             (T + "test_hist_statistical.py::test_laplace_add_remove_frequency_bound_is_the_exact_formula",)),
    Mutation("conversion-L-5pct", "audits: a 5 % leak in the conversion constant L", "friendlycore/conversion.py",
             "return 2 * (1 - alpha) / (1 - 2 * alpha) + alpha", "return 1.9 * (1 - alpha) / (1 - 2 * alpha) + alpha",
             (FC + "test_fc_exact_audit.py",)),
    Mutation("filter-alpha-quarter", "audits: the filter uses α = 1/4 more than claimed", "friendlycore/filter.py",
             "    near = exact.limit_denominator(_ALPHA_DEN)\n",
             "    exact = exact + Fraction(1, 4) if exact < Fraction(1, 4) else exact\n"
             "    near = exact.limit_denominator(_ALPHA_DEN)\n",
             (FC + "test_fc_exact_audit.py::test_exact_loss_within_the_conversion_claim",)),
    Mutation("secure-rng-fixed-key", "unseeded secure randomness: rng=None must not repeat", "noise/rng.py",
             "        return secure_generator(), True", "        return np.random.default_rng(0), True",
             (FC + "test_fc_mean.py::test_release_fields_and_secure_default",)),
    # ---- documented behaviour nothing tested
    Mutation("laplace-ar-ci-collapsed", "Laplace add/remove intervals collapsed to the estimate", H,
             "        return _ratio_intervals(c, a, s, total)\n\n    def to_dict",
             "        return c / total, c / total\n\n    def to_dict",
             (T + "test_hist_statistical.py::test_laplace_add_remove_intervals_known_answers",)),
    Mutation("laplace-ar-ci-no-fallback", "Laplace add/remove intervals: the [0, 1] fallback", H,
             "    if total <= s:\n        return np.zeros_like(c), np.ones_like(c)\n", "",
             (T + "test_hist_statistical.py::test_laplace_add_remove_intervals_known_answers",)),
    Mutation("cli-threshold-tight", "CLI --threshold seed ignored", "cli/histogram.py",
             "neighbors=neighbors, threshold=threshold, rng=rng,", 'neighbors=neighbors, threshold="tight", rng=rng,',
             ("tests/cli/test_cli_histogram_options.py::test_threshold_seed_is_used",)),
    Mutation("cli-beta-ignored", "CLI --beta ignored in the JSON", "cli/histogram.py",
             "print_json(release, beta=b,", "print_json(release, beta=DEFAULT_BETA,",
             ("tests/cli/test_cli_histogram_options.py::test_beta_sets_the_bound_in_json_and_table",)),
    Mutation("cli-error-bound-not-null", "README: error_bound null when no finite bound", "cli/_render.py",
             '"error_bound": _finite_or_none(release.error_bound(beta)),', '"error_bound": float(release.error_bound(beta)),',
             ("tests/cli/test_cli_histogram_options.py::test_error_bound_null_when_no_finite_bound",)),
    Mutation("cli-laplace-neighbors", "CLI Laplace add/remove path runs replace", "cli/histogram.py",
             "domain=domain_keys, neighbors=neighbors, rng=rng", 'domain=domain_keys, neighbors="replace", rng=rng',
             ("tests/cli/test_cli_histogram_options.py::test_laplace_add_remove_path",)),
    Mutation("epsilon-rounded-up", "ε rounded up (noise below nominal)", H,
             'name="epsilon", direction="down")', 'name="epsilon", direction="up")',
             (T + "test_hist_epsilon_rounding.py",)),
    Mutation("ledger-fallback-overwrites", "Ledger.create without hard links overwrites a racing file",
             "accounting/ledger.py", 'open(target, "xb") as out', 'open(target, "wb") as out',
             ("tests/accounting/test_ledger_create.py",)),
    Mutation("ledger-fallback-truncated", "Ledger.create without hard links: an incomplete copy",
             "accounting/ledger.py", "out.write(src.read())", "out.write(src.read()[:4096])",
             ("tests/accounting/test_ledger_create.py",)),
    Mutation("ledger-race-unreported", "Ledger.create race: FileExistsError instead of ParameterError",
             "accounting/ledger.py", "            except FileExistsError:\n                raise fail(where",
             "            except KeyError:\n                raise fail(where",
             ("tests/accounting/test_ledger_create.py",)),
    Mutation("mean-cli-calibration", "mean --calibration laplace|zcdp ignored", "cli/mean.py",
             "radius=r, calibration=calibration,", 'radius=r, calibration="gaussian",',
             (FC + "test_fc_mean_cli.py::test_cli_other_calibrations",)),
    Mutation("mean-cli-columns-field", "mean JSON columns field", "cli/mean.py",
             '"columns": cols,', '"columns": columns,',
             (FC + "test_fc_mean_cli.py::test_cli_other_calibrations",)),
    # ---- issue 10 (never a record) and the stable histogram's add/remove total
    Mutation("stable-total-at-count-scale", "stable add/remove: the total drawn at the counts' scale (ε overspent)",
             H, "discrete_laplace(params.total_scale, size=1, rng=rng)",
             "discrete_laplace(params.scale, size=1, rng=rng)",
             (T + "test_hist_add_remove_total.py",)),
    Mutation("stable-total-bound-ignores-total", "stable add/remove: error bound without the total's noise", H,
             "released = _ratio_error_bound(k, s * f_up, total)", "released = _ratio_error_bound(k, 0, total)",
             (T + "test_hist_add_remove_total.py",)),
    Mutation("csv-strict-mode", "CSV: DuckDB's strict reader (one lone CR aborts the scan)", "engines/duckdb.py",
             "comment = '', strict_mode = false", "comment = '', strict_mode = true",
             ("tests/engines/test_csv_robustness.py",)),
    Mutation("keys-negative-zero", "keys: −0.0 released as −0.0 (spelling depends on record order)",
             "engines/counting.py", "keys = np.where(keys == 0, keys.dtype.type(0), keys)", "pass",
             ("tests/engines/test_canonical_keys.py",)),
    Mutation("render-no-escape", "CLI: control characters printed raw", "cli/_render.py",
             "    if backslash:\n        return _INVISIBLE.sub(_escape, s)", "    if backslash:\n        return s",
             ("tests/cli/test_cli_escaping.py",)),
    Mutation("render-markup", "CLI: released keys rendered as rich markup", "cli/_render.py",
             "markup=False, emoji=False", "markup=True, emoji=True",
             ("tests/cli/test_cli_escaping.py",)),
    # ---- issue 13: group-by aggregates (privagg.aggregate and its metrics)
    Mutation("agg-count-replace-factor-1", "aggregate: count Δ without the factor 2 for replace", GB,
             "    factor = 2 if c.replace else 1\n    sens = factor * c.max_groups * c.max_rows",
             "    factor = 1\n    sens = factor * c.max_groups * c.max_rows",
             (TA + "test_bounded_known.py::test_count_plan_known_answers",)),
    Mutation("agg-sum-replace-factor-1", "aggregate: sum Δ without the factor 2 for replace", GB,
             "    factor = 2 if c.replace else 1\n    changed = factor * c.max_groups",
             "    factor = 1\n    changed = factor * c.max_groups",
             (TA + "test_bounded_known.py::test_sum_plan_known_answers",)),
    Mutation("agg-count-no-linf", "aggregate: count Δ = ℓ0 (without ℓ∞)", GB,
             "sens = factor * c.max_groups * c.max_rows", "sens = factor * c.max_groups",
             (TA + "test_bounded_known.py::test_count_plan_known_answers",)),
    Mutation("agg-sum-no-linf", "aggregate: sum Δ without ℓ∞", GB,
             "term_sens = changed * c.max_rows * row_bound", "term_sens = changed * row_bound",
             (TA + "test_bounded_known.py::test_sum_plan_known_answers",)),
    Mutation("agg-sum-no-clamp", "aggregate: sum terms not clamped to [lo, hi]", GB,
             "    x = np.fmax(np.asarray(values, dtype=np.float64), lower)\n    np.fmin(x, upper, out=x)\n",
             "    x = np.array(values, dtype=np.float64)\n",
             (TA + "test_bounded_exact.py",)),
    Mutation("agg-mean-sum-sens-half", "aggregate: bounded mean's centered-sum Δ halved", GB,
             "centered = _sum_plan(where, lo, hi, e_t - 1, k_hi - k_lo, target, c, beta)",
             "centered = _sum_plan(where, lo, hi, e_t - 1, (k_hi - k_lo) // 2, target, c, beta)",
             (TA + "test_bounded_known.py::test_mean_plan_known_answers",)),
    Mutation("agg-quantile-scale-no-2", "aggregate: quantile noise Δ/ε instead of 2Δ/ε", GQ,
             "scales = tuple(Fraction(2 * delta_u) / (eps_g * share) for share in shares)",
             "scales = tuple(Fraction(delta_u) / (eps_g * share) for share in shares)",
             (TA + "test_quantile.py",)),
    Mutation("agg-quantile-point-flat", "aggregate: quantile point utility −|b·c − a·n| (an atom ties with its gap)", GQ,
             "    return -np.maximum(np.maximum(b * below - an, an - b * cum), 0)\n",
             "    return -np.abs(an - b * cum)\n",
             (TA + "test_quantile.py::test_point_utility_on_atoms",
              TA + "test_quantile_atoms.py::test_penguin_years_median_is_the_atom")),
    Mutation("agg-quantile-no-tie-slot", "aggregate: quantile rows equal to a candidate not in a slot of their own", GQ,
             "    tie &= (y >= 0) & (y < k)\n", "    tie &= False\n",
             (TA + "test_quantile.py::test_counts_dyadic_pair_exact_at_boundaries",
              TA + "test_quantile_atoms.py::test_penguin_years_median_is_the_atom")),
    Mutation("agg-quantile-tie-underflow", "aggregate: quantile tie test takes a scaled value underflowing to 0 as on the grid", GQ,
             "    tie = (s == y) & ((s != 0) | (x == 0))\n", "    tie = s == y\n",
             (TA + "test_quantile.py::test_counts_dyadic_pair_exact_at_boundaries",)),
    Mutation("agg-quantile-stage2-points", "aggregate: unbounded quantile's stage 2 by points (uniform over the octave on data narrower than a step)", GQ,
             "scales[-1], rng, cells=True)", "scales[-1], rng, cells=False)",
             (TA + "test_quantile.py::test_unbounded_far_data_within_a_step",)),
    Mutation("agg-quantile-counts-count-only", "aggregate: an unbounded quantile without count() ignores its column's unbounded mean (no counts, no window)", AG,
             "        if mean is not None and \"n_hat\" in (mean.extra or {}):\n",
             "        if False:\n",
             (TA + "test_quantile_mean_window.py::test_window_without_count_from_the_means_own_counts",
              TA + "test_quantile_mean_window.py::test_window_without_count_for_another_quantile")),
    Mutation("agg-quantile-replace-1", "aggregate: quantile ε per group without the replace factor", GQ,
             "groups_per_unit = int(contribution.max_groups) * (2 if contribution.replace else 1)",
             "groups_per_unit = int(contribution.max_groups)",
             (TA + "test_quantile.py",)),
    Mutation("agg-selection-no-l0", "aggregate: key selection at ε_sel, δ_sel (no division by ℓ0)", AG,
             "k = int(max_groups) * (2 if replace else 1)", "k = 2 if replace else 1",
             (TA + "test_api_aggregate.py::test_selection_parameters_known_answers",)),
    Mutation("agg-split-ignores-weights", "aggregate: the budget split ignores the weights", AG,
             "return {s: (eps * w[s] / total_w, dlt * w[s] / total_dw if need",
             "return {s: (eps / len(w), dlt / len(delta_steps) if need",
             (TA + "test_api_aggregate.py::test_split_default_and_weights_known_answers",)),
    Mutation("agg-ledger-after-noise", "aggregate: noise drawn (metrics run) before the ledger charge", AG,
             "        if ledger is not None:\n            ledger.charge(loss, mechanism=caller",
             "        _early = ({m.name: m.run(cand, *split[m.name], Contribution(l0, linf, replace), gen) for m in mets}\n"
             "                  if cand.size else None)\n"
             "        if ledger is not None:\n            ledger.charge(loss, mechanism=caller",
             (TA + "test_aggregate_mutants.py",)),
    Mutation("agg-engine-count-no-linf", "aggregate engine: counts of a unit's rows not capped at ℓ∞", EG,
             "least(x.r, $linf)::BIGINT AS r ", "(x.r + 0 * $linf)::BIGINT AS r ",
             (TA + "test_api_aggregate.py::test_units_bounding_caps_groups_and_rows",)),
    Mutation("agg-engine-values-no-linf", "aggregate engine: every row of a kept (unit, group) kept", EG,
             'whole = f"SELECT {kl}, {vl} FROM tk WHERE r_all <= $linf"',
             'whole = f"SELECT {kl}, {vl} FROM tk WHERE r_all > 0 OR $linf < 0"',
             (TA + "test_api_aggregate.py::test_units_bounding_caps_groups_and_rows",)),
    Mutation("agg-floor-cap-off", "aggregate: spread floor without its cap (constant groups lifted)", "mechanisms/mean.py",
             "    return math.ceil(2.0 * math.log((FLOOR_OCTAVES + 1) / FLOOR_BETA) / float(eps_floor))",
             "    return 0",
             (TA + "test_spread_floor.py::test_constant_groups_keep_their_tiny_range",)),
    Mutation("agg-floor-noise-quarter", "aggregate: spread floor noise DLap(1/ε_f) for the Δ = 2 twice-utility", GM,
             '"floor", tuple(4 / e for e in eps_floors)', '"floor", tuple(1 / e for e in eps_floors)',
             (TA + "test_spread_floor.py::test_floor_noise_scale_is_4_over_eps_floor",)),
    Mutation("agg-floor-off", "aggregate: no spread floor (a 0/1 group releases its majority value)", GM,
             "upper = np.ldexp(upper, np.where(ok, k_floor, 0))", "upper = np.ldexp(upper, 0 * k_floor)",
             (TA + "test_spread_floor.py::test_binary_groups_release_their_proportion",)),
    Mutation("mean-floor-noise-quarter", "mean: spread floor noise DLap(1/ε_f) for the Δ = 2 twice-utility",
             "mechanisms/mean.py", "discrete_laplace(\n        4 / plan.eps_floor,", "discrete_laplace(\n        1 / plan.eps_floor,",
             (FC + "test_fc_mean_floor.py::test_plan_floor_share_and_noise_scale",)),
    Mutation("mean-floor-off", "mean: no spread floor (a 0/1 column with a 10 % minority releases the atom)",
             "mechanisms/mean.py",
             "upper = math.ldexp(upper, spread_floor_pick(data, center, upper, plan, gen, tied))",
             "upper = math.ldexp(upper, 0 * spread_floor_pick(data, center, upper, plan, gen, tied))",
             (FC + "test_fc_mean_floor.py::test_binary_column_releases_its_proportion",)),
    Mutation("mean-auto-loss-gaussian", "mean: the ledger charged the Gaussian plans' loss when \"auto\" ran Laplace",
             "mechanisms/mean.py",
             "        loss = mean_privacy_loss(epsilon, delta, calibration=calibration, alpha=alpha,",
             "        loss = mean_privacy_loss(epsilon, delta, calibration=\"gaussian\", alpha=alpha,",
             (FC + "test_fc_mean_auto.py::test_release_reports_the_chosen_calibration_and_its_guarantee",)),
    Mutation("agg-recentre-off", "aggregate: the FriendlyCore sum centred at ĉ (sensitivity max(R_lo, R_hi), not the half range)", GM,
             "s_up = np.where(ok, s_up, 0.0)", "s_up = 0.0 * s_up",
             (TA + "test_recentre.py::test_recentred_sum_sensitivity_is_the_half_range",
              TA + "test_recentre.py::test_recentred_sum_error_on_a_skewed_column")),
    Mutation("agg-range-sum-sens-min", "aggregate: clipped range sum with sensitivity min(R_lo, R_hi)", GM,
             "    clip_r = np.maximum(r_lo, r_hi)\n    e_s = np.frexp(clip_r)[1] - TERM_BITS",
             "    clip_r = np.minimum(r_lo, r_hi)\n    e_s = np.frexp(clip_r)[1] - TERM_BITS",
             (TA + "test_recentre.py::test_range_sum_sensitivity_is_the_longer_side",)),
    Mutation("agg-small-rate-old", "aggregate: the locate subsample at rate min(1, m_locate/n̂) in the small-plan groups (rows dropped from §8)", GM,
             "    rate = np.where(small, 1.0, np.where(live, np.minimum(1.0, m_loc / n_pos), 0.0))",
             "    rate = np.where(live, np.minimum(1.0, m_loc / n_pos), 0.0)",
             (TA + "test_small_rows_from_subsample.py",)),
    Mutation("agg-two-pass-clip-double", "aggregate: the small plan's deviation range sampled at 4·ε_c (weights exp(2·ε_c·u): loss 2·ε_c)", GM,
             "base_measure(cost),\n                    2 * e_clip)", "base_measure(cost),\n                    4 * e_clip)",
             (TA + "test_two_pass.py::test_budget_known_answers",
              TA + "test_two_pass.py::test_deviation_range_step_exact_loss")),
    Mutation("agg-two-pass-all-rows", "aggregate: the deviation range reads the rows of every small group (not only those of T)", GM,
             "    dev = xg[rows] - first[grow]  # deviations", "    dev = xg[rows] - first[grow]; rows[:] = True; grow = gg; dev = xg - first[gg]  # deviations",
             (TA + "test_two_pass.py::test_deviation_utility_reads_only_the_two_pass_rows",)),
    Mutation("agg-two-pass-pooled-center", "aggregate: the second pass centred at the pooled center (not each group's first mean)", GM,
             "        c2 = _finite(first + w * ((k_hi - k_lo) / 2))", "        c2 = _finite(center + w * ((k_hi - k_lo) / 2))",
             (TA + "test_two_pass.py::test_located_groups_two_pass_accuracy",)),
    Mutation("agg-med-clip-double", "aggregate §8.3: the deviations' range sampled at 4·ε_c (weights exp(2·ε_c·u): loss 2·ε_c)", GM,
             "base_measure(cost),\n                        2 * e_cl)", "base_measure(cost),\n                        4 * e_cl)",
             (TA + "test_median_centred.py::test_budget_and_inputs_known_answers",
              TA + "test_median_centred.py::test_range_step_exact_loss")),
    Mutation("agg-med-all-rows", "aggregate §8.3: the deviations' range reads the rows of every small group (also those without a median)", GM,
             "    rows = fm[gg]\n    with np.errstate", "    rows = np.ones(gg.size, bool)\n    with np.errstate",
             (TA + "test_median_centred.py::test_range_utility_reads_the_deviations_of_the_centred_groups",)),
    Mutation("agg-med-pooled-center", "aggregate §8.3: the sums centred at the medians' median (not each group's median)", GM,
             "        center = np.where(fm, _finite(med + (r_hi - r_lo) / 2), np.nan)",
             "        center = np.where(fm, _finite(mid + (r_hi - r_lo) / 2), np.nan)",
             (TA + "test_median_centred.py::test_located_groups_accuracy",)),
    Mutation("agg-med-sums-eps", "aggregate §8.3: the sums at ε_sum (the range's share spent twice)", GM,
             "    return e_cl, eps_sum - e_cl", "    return e_cl, eps_sum",
             (TA + "test_median_centred.py::test_shares_known_answers",)),
    Mutation("agg-med-wider", "aggregate §8.3: the groups centred at their medians even with a range wider than step 4's", GM,
             "        if r_m[0] < rad:  # guard 2", "        if True:  # guard 2",
             (TA + "test_median_centred.py::test_wider_range_keeps_the_pooled_one",)),
    Mutation("agg-med-two-pass", "aggregate §8.3: the groups of §8.2 centred at their medians too (their second pass lost)", GM,
             "        fm = median_groups(ok & ~two_pass_groups(n_t, ok, sum_rule_eps), med, rad)",
             "        fm = median_groups(ok, med, rad)",
             (TA + "test_median_centred.py::test_two_pass_groups_keep_their_two_passes",)),
    Mutation("agg-med-one-location", "aggregate §8.3: groups centred at their medians when all medians are equal (no switch)", GM,
             "    if not fm.any() or float(np.max(med[fm])) - float(np.min(med[fm])) <= MEDIAN_SWITCH * rad:",
             "    if not fm.any():",
             (TA + "test_median_centred.py::test_median_groups_rule",)),
    Mutation("agg-med-never", "aggregate §8.3: no query centres the mean's sums at its medians", AG,
             "and q.q == 0.5 and q.column == m.column:", "and q.q == 0.5 and q.column == m.column and False:",
             (TA + "test_median_centred.py::test_which_queries_centre",
              TA + "test_median_centred.py::test_aggregate_draws_the_median_inside_the_mean")),
    Mutation("agg-small-octave-cells", "aggregate small-group plan: the pooled cell step over the octave cells again (no point cells)", GM,
             "    lo, hi, oct_, point, geo_a, geo_b = point_cells(CELL_E_MIN)\n",
             "    lo, hi, oct_, point, geo_a, geo_b = point_cells(CELL_E_MIN)\n"
             "    lo, hi, oct_ = __import__('privagg.mechanisms.mean_small', fromlist=['x']).octave_cells(CELL_E_MIN)\n"
             "    point, geo_a, geo_b = np.zeros(lo.size, bool), lo, hi\n",
             (TA + "test_small_plan_mass_cells.py::test_pooled_steps_replay",)),
    Mutation("agg-small-cell-median", "aggregate small-group plan: the pooled cell on the median utility again", GM,
             "    util = cell_mass_utility(xs, lo, hi, cell_floor(n_low))[None, :]\n",
             "    util = __import__('privagg.mechanisms.mean_small', fromlist=['x']).cell_utility(xs, lo, hi, cell_floor(n_low))[None, :]\n",
             (TA + "test_small_plan_mass_cells.py::test_pooled_steps_replay",)),
    Mutation("agg-small-spread-median", "aggregate small-group plan: the pooled spread on the median utility again", GM,
             "    util = centred_spread_mass_utility(below_hi, below_lo, int(xs.size))[None, :]\n",
             "    util = __import__('privagg.mechanisms.mean_small', fromlist=['x']).centred_spread_utility(below_hi, below_lo, int(xs.size))[None, :]\n",
             (TA + "test_small_plan_mass_cells.py::test_pooled_steps_replay",)),
    Mutation("agg-small-ladder-old", "aggregate small-group plan: the pooled side ladder from 1/8 again", GM,
             "SIDE_KS_POOLED = tuple(2.0 ** (i / 2) for i in range(-14, 9))",
             "SIDE_KS_POOLED = tuple(2.0 ** (i / 2) for i in range(-6, 9))",
             (TA + "test_small_plan_mass_cells.py::test_empty_side_takes_a_small_radius",)),
    Mutation("agg-two-pass-unit-spread", "aggregate small-group plan: the second pass's ladder unit back to the pooled spread s", GM,
             "TWO_PASS_UNIT = 0.25\n", "TWO_PASS_UNIT = 1e300\n",
             (TA + "test_small_plan_mass_cells.py::test_second_pass_unit_known_answer",)),
    Mutation("agg-refine-off", "aggregate small-group plan: no refinement of the pooled cell (step 2b; far data's offset as spread)", GM,
             "SMALL_REFINE = True\n", "SMALL_REFINE = False\n",
             (TA + "test_small_plan_refine.py::test_far_groups", TA + "test_small_plan_refine.py::test_years_groups")),
    Mutation("agg-refine-free", "aggregate small-group plan: step 2b's ε not taken from the sums (overspent)", GM,
             "        return SmallBudget(e_c2, e, e, e / 2, sums - e_lv - e_s2, e_lv, e_s2, floored=e_lv != capped)\n",
             "        return SmallBudget(e_c2, e, e, e / 2, sums, e_lv, e_s2, floored=e_lv != capped)\n",
             (TA + "test_small_plan_refine.py::test_refine_budget_known_answers",)),
    Mutation("agg-refine-no-extra", "aggregate small-group plan: step 2b stops at s/32 (a cell as wide as the offset)", GM,
             "REFINE_EXTRA = 1\n", "REFINE_EXTRA = 0\n",
             (TA + "test_small_plan_refine.py::test_far_groups",)),
    Mutation("agg-refine-any-rows", "aggregate small-group plan: step 2b however few pooled rows (random refined pair)", GM,
             "REFINE_ROWS = 8\n", "REFINE_ROWS = 1\n",
             (TA + "test_small_plan_refine.py::test_too_few_pooled_rows_skip_the_step",)),
    Mutation("agg-partial-off", "aggregate small-group plan: no partial step 2b (far groups of 200 rows thousands of sd off)", GM,
             "REFINE_PARTIAL_MIN = 2\n", "REFINE_PARTIAL_MIN = 10**9\n",
             (TA + "test_small_plan_refine.py::test_partial_far_groups",)),
    Mutation("agg-gate-off", "aggregate small-group plan: the partial step's gate never stops (near data pay every level)", GM,
             "REFINE_GATE = 0.5\n", "REFINE_GATE = 0.0\n",
             (TA + "test_small_plan_refine.py::test_gate_stops_near_data",)),
    Mutation("agg-gate-budget-lost", "aggregate small-group plan: a gated step's unspent ε not given back to the sums", GM,
             "    back = bud.eps_levels - e_level + (0 if spread2 else bud.eps_spread2)\n",
             "    back = 0 if spread2 else bud.eps_spread2\n",
             (TA + "test_small_plan_refine.py::test_partial_budget_known_answers",)),
    Mutation("agg-quantile-window-scale", "aggregate quantile: the small groups' window stage at twice its ε (half the bounded scale)", GQ,
             "    scale = stage_scales(a, b, epsilon, contribution, bounded=True)[0]\n    lo, hi =",
             "    scale = stage_scales(a, b, epsilon, contribution, bounded=True)[0] / 2\n    lo, hi =",
             (TA + "test_quantile_mean_window.py::test_window_stage_is_the_bounded_mechanism",)),
    Mutation("agg-quantile-window-small-only", "aggregate quantile: only the groups below rows_needed released over the mean's window (the others by the octave search)", GQ,
             "        use = _window_groups(windows, G) if n_hat is not None else np.zeros(G, dtype=bool)\n",
             "        use = (_window_groups(windows, G) & (np.asarray(n_hat) < rows_needed(q, epsilon, contribution))\n"
             "               if n_hat is not None else np.zeros(G, dtype=bool))\n",
             (TA + "test_quantile_mean_window.py::test_window_stage_is_the_bounded_mechanism",
              TA + "test_quantile_mean_window.py::test_large_groups_of_far_data_released_from_the_window")),
    Mutation("agg-clip-columns-center", "aggregate: the lower end of the unbounded mean's released clipping range twice as far below the center (not the range its values were clamped to)", AG,
             "            data[m.name + \"_clip_low\"] = np.asarray(r.extra[\"clip_low\"], dtype=np.float64)\n",
             "            data[m.name + \"_clip_low\"] = 2 * np.asarray(r.extra[\"clip_low\"], dtype=np.float64) - r.extra[\"center\"]\n",
             (TA + "test_clip_columns.py::test_columns_for_unbounded_means_only",
              TA + "test_clip_columns.py::test_interval_covers_the_clamped_mean_on_cars")),
    Mutation("agg-subcells-off", "aggregate small-group plan: the pooled cell among the point cells only (no octave subcells: years in a four-metric query ~15 sd off)", GM,
             "SMALL_SUBCELLS = True\n", "SMALL_SUBCELLS = False\n",
             (TA + "test_small_plan_subcells.py::test_years_located",)),
    Mutation("agg-subcells-unshifted", "aggregate small-group plan: the octave subcells without the shifted family (rows straddling a dyadic edge share no subcell)", GM,
             "    steps = np.concatenate([np.arange(m, dtype=np.float64), np.arange(m - 1, dtype=np.float64) + 0.5])\n",
             "    steps = np.arange(m, dtype=np.float64)\n",
             (TA + "test_small_plan_subcells.py::test_candidates_known_answers",)),
    Mutation("agg-subcells-prior-unnormalized", "aggregate small-group plan: the octave cell keeps its whole base measure beside its subcells (each octave's total changes)", GM,
             "        lp_oct[home] += math.log(alpha)\n", "        lp_oct[home] += 0.0\n",
             (TA + "test_small_plan_subcells.py::test_candidates_known_answers",)),
    Mutation("agg-refine-floor-off", "aggregate small-group plan: no floor of step 2b's shares (far columns in 100-row groups of a four-metric query sd's off)", GM,
             "REFINE_FLOOR_SHARE = Fraction(1, 2)\n", "REFINE_FLOOR_SHARE = Fraction(0)\n",
             (TA + "test_small_plan_refine.py::test_floor_far_columns",)),
    Mutation("agg-refine-floor-uncapped", "aggregate small-group plan: the floor of step 2b's shares without its share limit", GM,
             "        if lv <= e * REFINE_LEVELS and lv + 2 * s2 <= REFINE_FLOOR_SHARE * sums:\n",
             "        if lv <= e * REFINE_LEVELS:\n",
             (TA + "test_small_plan_refine.py::test_refine_budget_known_answers",)),
    Mutation("agg-spread-test-off", "aggregate small-group plan: the partial step's second spread never stops near data", GM,
             "                if s2 * REFINE_USE > s:  # public\n", "                if False:  # public\n",
             (TA + "test_small_plan_refine.py::test_spread_test_stops_near_data",)),
    Mutation("agg-far-no-third-spread", "aggregate small-group plan: the far branch keeps the second spread (around the first level's center)", GM,
             "        s, c1 = far_scale(s, c1, s2, c_first, s3, c2), c2\n", "        s, c1 = far_scale(s, c1, s2, c_first, s2, c2), c2\n",
             (TA + "test_small_plan_refine.py::test_partial_far_groups",)),
    Mutation("agg-far-scale-two", "aggregate small-group plan: the far branch's scale without the moved second spread", GM,
             "    return min(s3, s + abs(c1 - c2), s2 + abs(c_s2 - c2))\n", "    return min(s3, s + abs(c1 - c2))\n",
             (TA + "test_small_plan_refine.py::test_far_scale_known_answers",)),
    Mutation("agg-spread2-untop", "aggregate small-group plan: the second spread over the whole grid (top ignored)", GM,
             "    m = grid.size if top is None else max(int(np.searchsorted(grid, top, side=\"right\")), 1)\n",
             "    m = grid.size\n",
             (TA + "test_small_plan_refine.py::test_spread2_top_bounds_the_draw", TA + "test_small_plan_refine.py::test_spread2_top_rate")),
    Mutation("agg-spread2-top-wide", "aggregate small-group plan: the second spread's bound far above s", GM,
             "SPREAD2_TOP = 2\n", "SPREAD2_TOP = 2**40\n",
             (TA + "test_small_plan_refine.py::test_spread2_top_rate",)),
    Mutation("agg-far-s3-uncapped", "aggregate small-group plan: the third spread drawn over the whole grid", GM,
             "        s3 = _pooled_spread(xs, c2, draws, \"small_spread3\", bud.eps_spread3, edge=a, top=cap)\n",
             "        s3 = _pooled_spread(xs, c2, draws, \"small_spread3\", bud.eps_spread3, edge=a)\n",
             (TA + "test_small_plan_refine.py::test_third_spread_cap_traced",)),
    Mutation("agg-floor-two-levels", "aggregate small-group plan: the floor affords two levels only", GM,
             "REFINE_FLOOR_LEVELS = 3\n", "REFINE_FLOOR_LEVELS = 2\n",
             (TA + "test_small_plan_refine.py::test_refine_floor_levels_known_answers", TA + "test_small_plan_refine.py::test_floor_three_levels")),
    Mutation("agg-floor-ungated", "aggregate small-group plan: the floor's three levels run the full step (no gate)", GM,
             "        if affordable < levels or (refined_bud.floored and levels > REFINE_PARTIAL_MIN):\n",
             "        if affordable < levels:\n",
             (TA + "test_small_plan_refine.py::test_floor_gate_three_levels",)),
    Mutation("agg-floor-levels-unasked", "aggregate small-group plan: the floor's third level even where two are wanted", GM,
             "    for k in range(min(REFINE_FLOOR_LEVELS, max(int(levels), REFINE_PARTIAL_MIN)), REFINE_PARTIAL_MIN - 1, -1):\n",
             "    for k in range(REFINE_FLOOR_LEVELS, REFINE_PARTIAL_MIN - 1, -1):\n",
             (TA + "test_small_plan_refine.py::test_refine_floor_levels_known_answers",)),
    Mutation("agg-far-budget-lost", "aggregate small-group plan: the far branch's third spread not taken from the sums", GM,
             "    return dataclasses.replace(bud, eps_spread3=bud.eps_spread2, eps_sum=bud.eps_sum - bud.eps_spread2)\n",
             "    return dataclasses.replace(bud, eps_spread3=bud.eps_spread2, eps_sum=bud.eps_sum)\n",
             (TA + "test_small_plan_refine.py::test_partial_budget_known_answers",)),
    Mutation("agg-small-switch-old", "aggregate mean: the small-group plan only below plan 0's floor again (SMALL_SWITCH = 1)", GM,
             "SMALL_SWITCH = 5\n", "SMALL_SWITCH = 1\n",
             (TA + "test_pass_scales.py::test_binary_groups_above_the_old_switch_release_their_proportion", T + "test_grouped_mean_small.py::test_rule_known_answers")),
    Mutation("agg-scale-none", "aggregate small-group plan: no scale per group (every two-pass group on the pooled unit)", GM,
             "    return snap_scales(scale_picks(dev, grp, two, unit, e_s, draws), two)\n",
             "    return np.zeros(two.size, dtype=np.int64)\n",
             (TA + "test_pass_scales.py::test_groups_on_different_scales_keep_their_own_range",)),
    Mutation("agg-scale-noise-half", "aggregate small-group plan: the scale pick with DLap(2/ε_s) (half the proven noise)", GM,
             "    noisy = util + scale_offsets(e_s)[None, :] + draws.dlap(\"two_scale\", 4 / e_s, util.shape)\n",
             "    noisy = util + scale_offsets(e_s)[None, :] + draws.dlap(\"two_scale\", 2 / e_s, util.shape)\n",
             (TA + "test_two_pass.py::test_budget_known_answers",)),
    Mutation("agg-scale-budget-free", "aggregate small-group plan: the scaled groups' second pass not charged for the scale step", GM,
             "    e_sums = (eps_sum, e_two, e_two - e_scale)\n",
             "    e_sums = (eps_sum, e_two, e_two)\n",
             (TA + "test_two_pass.py::test_budget_known_answers",)),
    Mutation("agg-scale-rows-any", "aggregate small-group plan: the scale step for every two-pass group, however few rows", GM,
             "    return two & (np.asarray(n_tilde, dtype=np.float64) * float(e_scale) >= SCALE_ROWS)\n",
             "    return two.copy()\n",
             (TA + "test_pass_scales.py::test_scale_groups_rule", TA + "test_two_pass.py::test_scale_step_only_where_rows_suffice")),
    Mutation("mean-coord-no-spread-bound", "private_mean: the coordinate plan's spread back to s2 (refined) or s1, without the bound s1 + |c1 − c|", "mechanisms/mean_small.py",
             "            spread = np.where(zero, s1, np.minimum(s2, bound))",
             "            spread = np.where(zero | ~refined, s1, s2)",
             ("tests/friendlycore/test_fc_mean_coordinate_real.py::test_spread_is_bounded_by_the_first_spread_plus_the_move",)),
    Mutation("mean-coord-shares-fifths", "private_mean: the coordinate plan's selections back to fifths of ρ/d (the cell's failures on real data)", "mechanisms/mean_small.py",
             "COORD_SHARES = (Fraction(2, 5), Fraction(3, 20), Fraction(3, 20), Fraction(3, 20), Fraction(3, 20))",
             "COORD_SHARES = (Fraction(1, 5), Fraction(1, 5), Fraction(1, 5), Fraction(1, 5), Fraction(1, 5))",
             # the real-columns test no longer tells fifths apart since the mass utilities (1 of 30
             # wild with fifths, 0 with 2/5; docs/utility/mean.md, eighth stop): the budget's known answers do
             ("tests/friendlycore/test_fc_mean_coordinate.py::test_budget_known_answers_and_charge",
              "tests/friendlycore/test_fc_mean_coordinate_real.py::test_real_columns_small_n_no_wild_releases")),
    Mutation("mean-coord-min-20", "private_mean: the coordinate plan's per-dimension floor back at 20·d/ε (wine at d = 10 released wild columns)", "mechanisms/mean_small.py",
             "COORD_MIN = 35", "COORD_MIN = 20",
             ("tests/friendlycore/test_fc_mean_coordinate_real.py::test_wine_d10_is_bottom_with_its_reason",)),
    Mutation("mean-large-rule-true-n", "private_mean: the large-sample rule read from the true row count instead of the released n̂", "mechanisms/mean.py",
             "    large = large_sample(n_hat, m_loc, epsilon, delta,", "    large = large_sample(n, m_loc, epsilon, delta,",
             ("tests/friendlycore/test_fc_mean_large.py::test_rule_reads_the_released_count",)),
    Mutation("mean-large-no-fit", "private_mean: the large-sample rule with the locate need fitting half a time instead of twice", "mechanisms/mean.py",
             "    return LARGE_FIT * (M_MIN + plan.core_count_shift) <= min(n_hat, m_locate)",
             "    return (M_MIN + plan.core_count_shift) <= 2 * min(n_hat, m_locate)",
             ("tests/friendlycore/test_fc_mean_large.py::test_rule_known_answers",)),
    Mutation("mean-large-given-radius", "private_mean: the large-sample shares also with a given radius (its core can be a small part of the subsample)", "mechanisms/mean.py",
             "    if LARGE_FIT <= 0 or not select_radius or n_hat * _frac(epsilon) < SMALL_SAMPLE:",
             "    if LARGE_FIT <= 0 or n_hat * _frac(epsilon) < SMALL_SAMPLE:",
             ("tests/friendlycore/test_fc_mean_large.py::test_rule_known_answers",)),
    Mutation("mean-large-in-small-range", "private_mean: the large-sample rule without the small-sample range check (both plans at once)", "mechanisms/mean.py",
             "    if LARGE_FIT <= 0 or not select_radius or n_hat * _frac(epsilon) < SMALL_SAMPLE:",
             "    if LARGE_FIT <= 0 or not select_radius:",
             ("tests/friendlycore/test_fc_mean_large.py::test_rule_known_answers",)),
    Mutation("mean-large-locate-fifth", "private_mean: the large plan's locate share back at ε/5 (nothing moves to the sums)", "mechanisms/mean.py",
             "LARGE_SHARE_LOCATE = Fraction(1, 10)", "LARGE_SHARE_LOCATE = Fraction(1, 5)",
             ("tests/friendlycore/test_fc_mean_large.py::test_large_plan_moves_half_the_locate_share_to_the_sums",
              "tests/friendlycore/test_fc_mean_large.py::test_large_plan_is_more_accurate")),
    Mutation("cell-floor-off", "coordinate plan and small-group plan: no occupancy floor in the cell step", "mechanisms/mean_small.py",
             "CELL_FLOOR = Fraction(1, 8)", "CELL_FLOOR = Fraction(0)",
             ("tests/friendlycore/test_cell_floor.py::test_cell_floor_known_answers",
              "tests/friendlycore/test_cell_floor.py::test_private_mean_two_atoms_half_and_half")),
    Mutation("cell-floor-coordinate-unused", "coordinate plan: the cell step without its floor (the small-group plan keeps it)", "mechanisms/mean_small.py",
             "cell_mass_utility_of_counts(b[: lo.size], b[lo.size :], n, tau)", "cell_mass_utility_of_counts(b[: lo.size], b[lo.size :], n)",
             ("tests/friendlycore/test_fc_mean_coordinate_audit.py::test_cell_step_call_carries_the_floor",
              "tests/friendlycore/test_cell_floor.py::test_private_mean_two_atoms_half_and_half")),
    Mutation("cell-floor-small-plan-unused", "aggregate small-group plan: the pooled cell step without the floor", GM,
             "cell_mass_utility(xs, lo, hi, cell_floor(n_low))", "cell_mass_utility(xs, lo, hi)",
             ("tests/friendlycore/test_cell_floor.py::test_aggregate_small_plan_binary_half_and_half",
              TA + "test_small_plan_mass_cells.py::test_pooled_steps_replay")),
    Mutation("cell-floor-term-rows-below", "cell step: the floor term against the rows below the cell's top instead of the rows in it", "mechanisms/mean_small.py",
             "        u = np.maximum(u, np.int64(floor) - (below_hi - below_lo))", "        u = np.maximum(u, np.int64(floor) - below_hi)",
             ("tests/friendlycore/test_cell_floor.py::test_cell_utility_floor_known_answers",)),
    Mutation("floor-penalty-off", "private_mean: no penalty on the spread floor's far octaves", "mechanisms/mean.py",
             "FLOOR_PENALTY = Fraction(1, 2)", "FLOOR_PENALTY = Fraction(0)",
             ("tests/friendlycore/test_fc_mean_floor.py::test_floor_offsets_known_answers",
              "tests/friendlycore/test_fc_mean_floor.py::test_floor_penalty_stops_the_plateau_pick")),
    Mutation("floor-penalty-free-zero", "private_mean: the floor's penalty from octave 1 (no free octaves)", "mechanisms/mean.py",
             "FLOOR_FREE = 4", "FLOOR_FREE = 0",
             ("tests/friendlycore/test_fc_mean_floor.py::test_floor_offsets_known_answers",)),
    Mutation("floor-penalty-on-tied", "private_mean: the floor's penalty also on a tied core", "mechanisms/mean.py",
             "        tied = r <= r_bottom  # public", "        tied = False  # public",
             ("tests/friendlycore/test_fc_mean_floor.py::test_tied_share_only_when_the_radius_is_the_grid_bottom",)),
    Mutation("zero-atom-weight-off", "coordinate plan: the annulus step without the unit annulus's weight", "mechanisms/mean_small.py",
             "ZERO_SPREAD_ATOM = 32.0", "ZERO_SPREAD_ATOM = 1.0",
             ("tests/friendlycore/test_fc_mean_coordinate_zero.py::test_zero_spread_atom_weight_known_answers",
              "tests/friendlycore/test_fc_mean_coordinate_zero.py::test_indicator_columns_small_n_no_wild_spread")),
    Mutation("zero-atom-weight-at-zero", "coordinate plan: the atom weight on the annuli holding 2^0 whatever the point", "mechanisms/mean_small.py",
             "    t = abs(float(distance)) if distance != 0.0 else math.ldexp(1.0, int(anchor))\n", "    t = 1.0\n",
             ("tests/friendlycore/test_fc_mean_coordinate_zero.py::test_zero_spread_atom_weight_known_answers",)),
    Mutation("atom-distance-octave", "coordinate plan: the atom weight at the point's octave 2^e, not its distance to 0", "mechanisms/mean_small.py",
             "    t = abs(float(distance)) if distance != 0.0 else math.ldexp(1.0, int(anchor))\n",
             "    t = math.ldexp(1.0, int(anchor))\n",
             ("tests/friendlycore/test_fc_mean_coordinate_zero.py::test_zero_spread_atom_weight_at_an_integer_point",
              "tests/friendlycore/test_fc_mean_coordinate_zero.py::test_integer_point_branch_as_called")),
    Mutation("integer-points-off", "coordinate plan: step 1 without the integer point cells", "mechanisms/mean_small.py",
             "INT_E_MAX = 3\n", "INT_E_MAX = 0\n",
             ("tests/friendlycore/test_fc_mean_coordinate_zero.py::test_point_cells_known_answers",
              "tests/friendlycore/test_fc_mean_coordinate_zero.py::test_integer_atom_small_n_no_wild_release")),
    Mutation("int-prior-as-point", "coordinate plan: the small integer points at PRIOR_POINT", "mechanisms/mean_small.py",
             "PRIOR_INT = 8.0\n", "PRIOR_INT = 0.125\n",
             ("tests/friendlycore/test_fc_mean_coordinate_zero.py::test_point_cells_known_answers",)),
    Mutation("cell-mass-median", "coordinate plan: step 1 on the median cell utility again", "mechanisms/mean_small.py",
             "    util = np.stack([cell_mass_utility_of_counts(b[: lo.size], b[lo.size :], n, tau) for b in below])\n",
             "    util = np.stack([cell_utility_of_counts(b[: lo.size], b[lo.size :], n, tau) for b in below])\n",
             ("tests/friendlycore/test_fc_mean_coordinate_audit.py::test_steps_match_coordinate_mean_calls",)),
    Mutation("level-mass-median", "coordinate plan: the refinement levels on the median cell utility again", "mechanisms/mean_small.py",
             "            util_j = cell_mass_utility_of_counts(bl[: sub_lo.size], bl[sub_lo.size :], n)\n",
             "            util_j = cell_utility_of_counts(bl[: sub_lo.size], bl[sub_lo.size :], n)\n",
             ("tests/friendlycore/test_fc_mean_coordinate_audit.py::test_steps_match_coordinate_mean_calls",)),
    Mutation("spread-mass-median", "coordinate plan: the spread steps on the median spread utility again", "mechanisms/mean_small.py",
             "((~zero, centred_spread_mass_utility, eps), (zero,", "((~zero, centred_spread_utility, eps), (zero,",
             ("tests/friendlycore/test_fc_mean_coordinate_audit.py::test_steps_match_coordinate_mean_calls",)),
    Mutation("cell-mass-floor-term", "coordinate plan: the mass utility's floor term without n", "mechanisms/mean_small.py",
             "        u = np.maximum(u, np.int64(n + floor) - (below_hi - below_lo))\n",
             "        u = np.maximum(u, np.int64(floor) - (below_hi - below_lo))\n",
             ("tests/friendlycore/test_mass_utilities.py::test_cell_mass_utility_known_answers",)),
    Mutation("spread-mass-inner-once", "coordinate plan: the spread mass utility counting the rows within once", "mechanisms/mean_small.py",
             "    return -np.maximum(2 * (np.int64(n) - c), 2 * (inner - z))\n",
             "    return -np.maximum(2 * (np.int64(n) - c), inner - z)\n",
             ("tests/friendlycore/test_mass_utilities.py::test_spread_mass_utility_known_answers",)),
    Mutation("integer-piece-uncut", "coordinate plan: an octave's first piece not cut at its first integer point", "mechanisms/mean_small.py",
             "        first_hi[c] = pts[0]\n", "",
             ("tests/friendlycore/test_fc_mean_coordinate_zero.py::test_point_cells_known_answers",)),
    Mutation("s2-anchor-first-spread", "coordinate plan: the second spread's base measure anchored at s1's octave again", "mechanisms/mean_small.py",
             "bud.e_s2, _octave(center), gen", "bud.e_s2, _octave(s1), gen",
             ("tests/friendlycore/test_fc_mean_coordinate_audit.py::test_steps_match_coordinate_mean_calls",)),
    Mutation("agg-spark-rows-no-shift", "aggregate on Spark: the unbounded mean's clipped sums without the recentring shift", "engines/spark_rows.py",
             "                    dev -= np.take(s, g)\n", "",
             ("tests/engines/test_spark_rows.py::test_spark_rows_equal_local_rows_on_hostile_values",)),
    Mutation("agg-spark-quantile-bin-shift", "aggregate on Spark: the quantile's cell counts one cell to the right", "engines/spark_rows.py",
             "            dense[flat[a:b] - c0 * w] = counts[a:b]",
             "            dense[np.minimum(flat[a:b] - c0 * w + 1, (c1 - c0) * w - 1)] = counts[a:b]",
             ("tests/engines/test_spark_rows.py::test_quantiles_on_spark_rows_equal_the_local_release",)),
    Mutation("agg-unbounded-mean-weight-1", "aggregate: a mean without bounds back at default weight 1 (2/9 of the benchmark query's ε)", AG,
             "UNBOUNDED_MEAN_WEIGHT = Fraction(2)", "UNBOUNDED_MEAN_WEIGHT = Fraction(1)",
             (TA + "test_split_default.py::test_unbounded_mean_default_weight_known_answers",)),
    Mutation("agg-duckdb-sums-half-up", "aggregate engine: DuckDB's clamped terms rounded half up (not half to even like numpy)", EG,
             "({y} - {fl} = 0.5 AND \"\n                     f\"({fl}::BIGINT & 1) = 1)", "({y} - {fl} = 0.5)",
             ("tests/engines/test_duckdb_sums.py::test_duckdb_column_sums_equal_numpy_on_hostile_values",)),
    Mutation("agg-duckdb-sums-no-filter", "aggregate engine: DuckDB's present counts include non-finite values", EG,
             'exprs.append(f"count({v}) FILTER (WHERE isfinite({v}))::BIGINT AS p_{v}")',
             'exprs.append(f"count({v})::BIGINT AS p_{v}")',
             ("tests/engines/test_duckdb_sums.py::test_duckdb_column_sums_equal_numpy_on_hostile_values",)),
    Mutation("agg-shared-count-clamp", "aggregate: the shared count back at p̃ + max(m̃, 0) (a column without missing values pays m̃'s noise)", GB,
             "value = p_hat + np.where(m_hat > h_m, m_hat, 0.0)", "value = p_hat + np.maximum(m_hat, 0.0)",
             (TA + "test_count_shared.py::test_shared_count_without_missing_values_is_the_present_count",)),
    Mutation("agg-shared-count-interval-half", "aggregate: the shared count's interval without m̃'s half-width", GB,
             "p_hat + h_p + np.maximum(m_hat + h_m, 0.0), mp.epsilon", "p_hat + h_p + np.maximum(m_hat, 0.0), mp.epsilon",
             (TA + "test_count_shared.py::test_shared_count_release_is_the_pair_and_the_mean",)),
    Mutation("agg-fc-core-sens-half", "aggregate: FriendlyCore core-average sensitivity r/m instead of 2r/m", GM,
             "spread_g = 2.0 * radius / g_c", "spread_g = 1.0 * radius / g_c",
             (TA + "test_aggregate_mutants.py",)),
    Mutation("mean-coord-1d-gate-old", "mean: one column ran the FriendlyCore plan from n̂·ε = 2500 (0/1 columns released their atom)",
             "mechanisms/mean_small.py",
             "top = COORD_SAMPLE_1D if d == 1 else COORD_SAMPLE if d <= COORD_NARROW_D else COORD_WIDE_MAX",
             "top = COORD_SAMPLE if d == 1 else COORD_SAMPLE if d <= COORD_NARROW_D else COORD_WIDE_MAX",
             (FC + "test_fc_mean_coordinate_wide.py::test_binary_column_between_the_plans_is_not_its_atom",)),
    Mutation("mean-coord-wide-gate-old", "mean: d >= 3 ran the FriendlyCore plan from n̂·ε/d = 1500 (a 0/1 column beside a heavy tail paid its clip)",
             "mechanisms/mean_small.py", "COORD_WIDE_MAX = 8192", "COORD_WIDE_MAX = 1500",
             (FC + "test_fc_mean_coordinate_wide.py::test_binary_column_beside_a_heavy_tail",)),
    Mutation("mean-scale-tail-off", "mean: the scale step kept the median rank at n̂·ε_col >= 800 (a heavy column sets everyone's clip)",
             "mechanisms/mean.py", "    if level < SCALE_TAIL_MIN:\n        return Fraction(1, 2)",
             "    if True:\n        return Fraction(1, 2)",
             (FC + "test_fc_mean_tied_columns.py::test_binary_column_beside_a_heavy_tail",)),
    Mutation("mean-scale-tail-ladder-off", "mean: the scale step's rank stopped at 7/8 (a fixed tail quantile, not deeper as n̂·ε grows)",
             "mechanisms/mean.py", "    while j < SCALE_TAIL_JMAX and level", "    while False and level",
             (FC + "test_fc_mean_tied_columns.py::test_scale_rank_is_a_public_rule",)),
    Mutation("mean-tails-top-down", "mean: noisy tails from the histogram's top only (n̂ minus the bottom sums unused)",
             "mechanisms/mean.py", "    if eps_count is None:\n        return top, np.sqrt(var_top)",
             "    if True:\n        return top, np.sqrt(var_top)",
             (FC + "test_fc_mean_tails.py::test_noisy_tails_known_answers",
              FC + "test_fc_mean_tails.py::test_minority_just_below_the_top_edge_is_not_clipped")),
    Mutation("mean-tail-top-never", "mean: an only-passing top edge always sent the release to the robust rule",
             "mechanisms/mean.py", "    robust = far | ((j_tail == 0) & ~top)", "    robust = far | (j_tail == 0)",
             (FC + "test_fc_mean_tails.py::test_minority_just_below_the_top_edge_is_not_clipped",)),
    Mutation("mean-floor-tied-share-off", "mean: the spread floor kept ε/20 when the radius is its grid's bottom",
             "mechanisms/mean.py", "    if plan.eps_floor > 0 and r <= r_bottom:", "    if False:",
             (FC + "test_fc_mean_floor.py::test_binary_minority_below_the_old_cap_is_found",)),
    Mutation("mean-floor-count-doubled", "mean: the spread floor's target with the count doubled (sensitivity 4)",
             "mechanisms/mean.py", "util = floor_utility(within[None, :], n, floor_cap(plan.eps_floor))[0]",
             "util = floor_utility(within[None, :], 2 * n, floor_cap(plan.eps_floor))[0]",
             (FC + "test_fc_mean_floor.py",)),
    Mutation("mean-coord-zero-ladder-off", "mean coordinate plan: the annulus path clips on the plain ladder (R >= 1.25·s)",
             "mechanisms/mean_small.py",
             "    for lower, ladder, extra in ((False, COORD_CLIP_KS, 0.0), (True, ZERO_CLIP_KS, ZERO_CLIP_RATE)):",
             "    for lower, ladder, extra in ((False, COORD_CLIP_KS, 0.0), (True, COORD_CLIP_KS, 0.0)):",
             ("tests/friendlycore/test_fc_mean_coordinate_clip.py::test_binary_column_radius_inside_the_annulus",)),
    Mutation("mean-coord-zero-lowering-off", "mean coordinate plan: the annulus grid points lifted one grid step by rounding",
             "mechanisms/mean_small.py", "    low = 1.0 - 2.0**-40 if lower else 1.0", "    low = 1.0",
             ("tests/friendlycore/test_fc_mean_coordinate_clip.py::test_zero_ladder_known_answers",)),
    Mutation("mean-coord-ladder-top-7", "mean coordinate plan: the clip ladder stops at 7 spreads (heavy tails clipped)",
             "mechanisms/mean_small.py", "COORD_CLIP_KS = (1.25, 2.0, 3.0, 5.0, 7.0, 10.0, 14.0, 20.0, 28.0, 40.0)",
             "COORD_CLIP_KS = (1.25, 2.0, 3.0, 5.0, 7.0)\nCOORD_K = 7.0",
             ("tests/friendlycore/test_fc_mean_coordinate_clip.py::test_heavy_tail_ladder_top",)),
    Mutation("mean-coord-two-pass-off", "mean coordinate plan: one sum around the atom at d = 1 (count noise × offset)",
             "mechanisms/mean_small.py", "TWO_PASS_DMAX = 1\n", "TWO_PASS_DMAX = 0\n",
             (TP + "test_two_passes_as_called", TP + "test_binary50_within_oracle_target")),
    Mutation("mean-coord-two-pass-shifted", "mean coordinate plan: the second pass keeps the radius R around f' (clips an extreme atom)",
             "mechanisms/mean_small.py",
             "    return f, min(_grid_up(radius + abs(f - center)), _grid_up(2.0 * radius))",
             "    return f, radius",
             (TP + "test_second_pass_range_known_answers", TP + "test_rating_column_covered_range")),
    Mutation("mean-coord-two-pass-full-second", "mean coordinate plan: the second pass at the whole ε_sum (ε_sum·11/10 spent)",
             "mechanisms/mean_small.py",
             "    rel = _noisy_clipped_release(column, np.array([f]), r2, eps_sum - eps_1, _LAPLACE, gen)",
             "    rel = _noisy_clipped_release(column, np.array([f]), r2, eps_sum, _LAPLACE, gen)",
             (TP + "test_two_passes_as_called",)),
    Mutation("mean-coord-two-pass-no-clamp", "mean coordinate plan: the second center not clamped into the first range",
             "mechanisms/mean_small.py",
             "    f = min(max(first, center - radius), center + radius)", "    f = first",
             (TP + "test_second_pass_range_known_answers",)),
    Mutation("mean-coord-cont-off", "mean coordinate plan: no step 4′ (an unresolved cell's offset sets the clip radius)",
             "mechanisms/mean_small.py", "CONT_RESOLVE = 4\n", "CONT_RESOLVE = 1e-300\n",
             (TC + "test_far_column_at_small_n", TC + "test_far_and_near_columns_at_d2")),
    Mutation("mean-coord-cont-rho-all", "mean coordinate plan: step 4′ gives each unresolved column the whole ρ (k columns overspend)",
             "mechanisms/mean_small.py", "    rho_j = rho / max(k, 1)\n", "    rho_j = rho\n",
             (TC + "test_continuation_budget_known_answers",)),
    Mutation("mean-coord-cont-sum-whole", "mean coordinate plan: step 4′'s sums also take the selections' ε",
             "mechanisms/mean_small.py", "    eps_sum = (rest_e - eps_out - eps_sel) / d\n", "    eps_sum = (rest_e - eps_out) / d\n",
             (TC + "test_continuation_budget_known_answers", TC + "test_continuation_loss_within_the_guarantee")),
    Mutation("mean-coord-cont-plan-budget", "mean coordinate plan: step 4′ runs at the plan's budget (spent twice)",
             "mechanisms/mean_small.py", "            bud = continuation_budget(epsilon, delta, d, low, int(unresolved.sum()))\n",
             "            pass\n",
             ("tests/friendlycore/test_fc_mean_coordinate_audit.py::test_steps_match_coordinate_mean_calls",)),
    Mutation("mean-coord-count-floor-off", "mean coordinate plan: no n̂·ε >= 200 floor (tiny tables released far)",
             "mechanisms/mean_small.py", "COORD_MIN_COUNT = 200\n", "COORD_MIN_COUNT = 0\n",
             ("tests/friendlycore/test_fc_mean_coordinate.py::test_tiny_tables_are_bottom_not_far",)),
    Mutation("mean-scale-untied-noise-half", "mean scale step: noise for sensitivity b on the utility in b-ths (Δ = 2b)",
             "mechanisms/mean.py", "noise = 4 * rank.denominator / eps_col", "noise = 2 * rank.denominator / eps_col",
             ("tests/friendlycore/test_fc_mean_tied_columns.py::test_scale_step_noise_scale_known_answer",)),
    Mutation("mean-coord-em-eps-double", "mean coordinate plan: exponential mechanism weights exp(ε·u), not exp(ε·u/2)",
             "mechanisms/mean_small.py", "num, den = eps.numerator, 2 * eps.denominator",
             "num, den = eps.numerator, eps.denominator",
             ("tests/friendlycore/test_fc_mean_coordinate_audit.py::test_step_within_epsilon_with_power",)),
)


def copy_src(dest: Path) -> Path:
    src = dest / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return src


def apply(src: Path, m: Mutation) -> None:
    path = src / "privagg" / m.path
    text = path.read_text(encoding="utf-8")
    found = text.count(m.old)
    if found != 1:
        raise SystemExit(f"mutation {m.id}: snippet found {found} times in src/privagg/{m.path} (must be 1)")
    path.write_text(text.replace(m.old, m.new), encoding="utf-8")


def run_tests(python: str, src: Path, tests: list[str], timeout: float) -> tuple[int | None, str, float]:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="1")
    check = subprocess.run([python, "-c", "import privagg; print(privagg.__file__)"], env=env, cwd=ROOT,
                           capture_output=True, text=True)
    if not check.stdout.strip().startswith(str(src)):
        raise SystemExit(f"privagg does not import from the copy {src}: {check.stdout or check.stderr}")
    start = time.monotonic()
    try:
        proc = subprocess.run([python, *PYTEST, *tests], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", time.monotonic() - start
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def first_failure(output: str) -> str:
    hit = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.M)
    return hit.group(1) if hit else "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--only", default="", help="comma-separated mutation ids")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run on the unmutated copy")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutation (default 300)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with the test extra")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.id in args.only.split(",")]
    if args.only and len(chosen) != len(set(args.only.split(","))):
        raise SystemExit(f"unknown mutation id in {args.only!r}")
    if args.list:
        for m in chosen:
            print(f"{m.id:28} {m.item}")
        return 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="privagg-mutants-") as tmp:
        if not args.no_baseline:
            base = copy_src(Path(tmp) / "baseline")
            for m in chosen:  # every snippet must be there, once
                apply(copy_src(Path(tmp) / f"check-{m.id}"), m)
            tests = sorted({t for m in chosen for t in m.tests})
            rc, out, secs = run_tests(args.python, base, [t for t in tests], args.timeout * 2)
            if rc != 0:
                print(out[-4000:])
                print(f"baseline: the selected tests fail without any mutation (exit {rc}); stopping")
                return 1
            print(f"baseline: {len(tests)} test selections pass on the unmutated copy ({secs:.0f} s)")
        rows = []
        for i, m in enumerate(chosen):
            src = copy_src(Path(tmp) / f"m{i}")
            apply(src, m)
            rc, out, secs = run_tests(args.python, src, list(m.tests), args.timeout)
            if rc is None:
                verdict, killer = "TIMEOUT", f"(over {args.timeout:.0f} s)"
            elif rc == 1:
                verdict, killer = "killed", first_failure(out)
            elif rc == 0:
                verdict, killer = "SURVIVED", "-"
            else:
                verdict, killer = f"ERROR({rc})", first_failure(out)
            rows.append((m.id, verdict, killer, secs))
            print(f"  {m.id:28} {verdict:9} {secs:5.1f} s  {killer}", flush=True)
            shutil.rmtree(src.parent, ignore_errors=True)
    width = max(len(r[0]) for r in rows)
    print()
    print(f"| {'mutation':{width}} | result   | killing test |")
    print(f"|{'-' * (width + 2)}|----------|--------------|")
    for mid, verdict, killer, _ in rows:
        print(f"| {mid:{width}} | {verdict:8} | {killer} |")
    bad = [r for r in rows if r[1] != "killed"]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} killed in {time.monotonic() - start:.0f} s"
          + ("" if not bad else f"; not killed: {', '.join(r[0] for r in bad)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
