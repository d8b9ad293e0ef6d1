"""bench/bench_engine.py's memory-bandwidth floor of a decode step: the bytes it counts from a
loaded model's arrays are the ones pipeline.sizes' formula gives for its configuration, the
matrices it times alone are the step's matrix-vector products, and bench/report.py shows the
measured floor as the results hold it."""
import os
import sys

import numpy as np
import pytest

from engine_support import fixture_names, get_model
from pipeline.kvcache import kv_cache_bytes
from pipeline.quantize import linear_shapes
from pipeline.sizes import parameter_counts

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
import bench_engine  # noqa: E402
import report  # noqa: E402


def expected_weight_bytes(config) -> int:
    """float32 bytes of what a decode step multiplies by, from the configuration alone: every
    block (projections, feed-forward, norms, biases), the final norm, and the unembedding matrix,
    which a tied model reads from its token table (V x d either way)."""
    c = parameter_counts(config)
    return 4 * (c.blocks + c.final_norm + config.vocab_size * config.d_model)


@pytest.mark.parametrize("name", fixture_names())
def test_the_bytes_a_step_reads_are_the_formulas(name):
    m = get_model(name)
    read = bench_engine.decode_read_bytes(m, 40)
    assert read["weights"] == expected_weight_bytes(m.config)
    assert read["kv"] == kv_cache_bytes(m.config, 40)              # float32 keys and values
    learned = m.config.positions == "learned"                    # GPT-2: a position row too
    assert read["embed_row"] == 4 * m.config.d_model * (2 if learned else 1)
    # a mean length over the timed steps counts the same bytes per position
    assert read["kv"] * 3 == 2 * bench_engine.decode_read_bytes(m, 60)["kv"]


def test_the_default_and_smollm2_read_what_they_hold(model, smollm2):
    for m in (model, smollm2):
        read = bench_engine.decode_read_bytes(m, 1)
        assert read["weights"] == expected_weight_bytes(m.config)
        # both tie their unembedding to the token table: all parameters are read, once each
        assert m.config.tied_embeddings and read["weights"] == 4 * m.n_params()


@pytest.mark.parametrize("name", fixture_names())
def test_the_matrices_timed_alone_are_the_steps_products(name):
    m = get_model(name)
    mats = bench_engine.decode_matrices(m)
    shapes = linear_shapes(m.config)                 # the blocks' linear layers, by config
    assert [w.shape for w in mats[:len(shapes)]] == [(i, o) for _, i, o, _ in shapes]
    assert len(mats) == m.config.n_layers * len(shapes) + 1
    assert mats[-1] is m.params["unembed"]
    assert mats[-1].shape == (m.config.d_model, m.config.vocab_size)
    wall, cpu = bench_engine.matmuls_only(mats, 2)
    assert wall > 0 and cpu >= 0


def test_the_bandwidth_probe_reads_the_bytes_asked_for():
    width, nbytes = 64, 4 * 64 * 1000 + 100
    probe = bench_engine.ReadBandwidth(nbytes, width)
    assert probe.nbytes == 4 * 64 * 1000                          # whole rows of `width`
    assert [b for _, b in probe.kinds.values()] == [probe.nbytes] * 3
    x = np.full((1, width), 0.5, dtype=np.float32)                # what each kind computes
    assert probe.kinds["gemv"][0]().shape == (1, 1000)
    assert probe.kinds["gemv_t"][0]().shape == (1, 1000)
    assert float(probe.kinds["stream"][0]()) == pytest.approx(0.25 * 32000, rel=1e-6)
    assert float(probe.kinds["gemv"][0]()[0, 0]) == pytest.approx(float(x.sum()) * 0.5)
    best = probe.measure(repeats=2)
    assert set(best) == {"gemv", "gemv_t", "stream"} and min(best.values()) > 0
    assert min(probe.best_cpu.values()) > 0


def measured_row(m, with_cpu):
    """A results row as bench_engine writes it, its timings from a short run of the model."""
    read = bench_engine.decode_read_bytes(m, 36.5)
    mats = bench_engine.decode_matrices(m)
    probe = bench_engine.ReadBandwidth(read["weights"] + read["kv"], m.config.d_model)
    probe.measure(repeats=1)
    wall, _, cpu = bench_engine.ours_decode(m, [1, 2, 3, 4], 8)
    mm_wall, mm_cpu = bench_engine.matmuls_only(mats, 2)
    floor = (read["weights"] + read["kv"]) / max(probe.best["gemv"], probe.best["gemv_t"])
    row = {"model": "austen", "read_weights_bytes": read["weights"], "read_kv_bytes": read["kv"],
           "kv_positions_mean": 36.5, "embed_row_bytes": read["embed_row"],
           "gemv_GBps": probe.best["gemv"] / 1e9, "gemv_t_GBps": probe.best["gemv_t"] / 1e9,
           "stream_GBps": probe.best["stream"] / 1e9, "decode_ms": 1000 * wall / 8,
           "matmuls_ms": 1000 * mm_wall, "floor_ms": 1000 * floor,
           "floor_ratio": wall / 8 / floor}
    if with_cpu:
        floor_cpu = (read["weights"] + read["kv"]) / max(probe.best_cpu["gemv"],
                                                        probe.best_cpu["gemv_t"])
        row.update({"gemv_cpu_GBps": max(probe.best_cpu["gemv"], probe.best_cpu["gemv_t"]) / 1e9,
                    "stream_cpu_GBps": probe.best_cpu["stream"] / 1e9,
                    "decode_cpu_ms": 1000 * cpu / 8, "matmuls_cpu_ms": 1000 * mm_cpu,
                    "floor_cpu_ms": 1000 * floor_cpu, "floor_cpu_ratio": cpu / 8 / floor_cpu})
    return row


@pytest.mark.parametrize("with_cpu", [True, False])
def test_the_report_shows_the_floor_the_results_hold(model, with_cpu):
    x = measured_row(model, with_cpu)
    lines = report.decode_floor({"rows": [x], "threads": 1 if with_cpu else 2})
    assert f"{x['embed_row_bytes']} B for austen" in lines[0]
    assert ("1 OpenBLAS thread)" in lines[0]) == with_cpu
    table = [line for line in lines if line.startswith("| austen")]
    assert len(table) == (2 if with_cpu else 1)
    cells = [c.strip() for c in table[0].strip("|").split("|")]
    assert cells[1].startswith(
        f"{(x['read_weights_bytes'] + x['read_kv_bytes']) / 1e6:.1f} MB (weights "
        f"{x['read_weights_bytes'] / 1e6:.1f}, KV cache {x['read_kv_bytes'] / 1e6:.1f} at 36.5 ")
    assert cells[2:] == [f"{x['gemv_GBps']:.1f} / {x['gemv_t_GBps']:.1f} GB/s",
                         f"{x['stream_GBps']:.1f} GB/s", f"{x['floor_ms']:.2f} ms",
                         f"{x['decode_ms']:.2f} ms", f"{x['floor_ratio']:.2f}x",
                         f"{x['matmuls_ms']:.2f} ms"]
    # the ratio shown is the decode step over the floor shown
    assert float(cells[6][:-1]) == pytest.approx(x["decode_ms"] / x["floor_ms"], abs=0.006)
    if with_cpu:
        cpu = [c.strip() for c in table[1].strip("|").split("|")]
        assert cpu[0] == "austen, by CPU time"
        assert cpu[1:] == ["", f"{x['gemv_cpu_GBps']:.1f} GB/s (the faster)",
                           f"{x['stream_cpu_GBps']:.1f} GB/s", f"{x['floor_cpu_ms']:.2f} ms",
                           f"{x['decode_cpu_ms']:.2f} ms", f"{x['floor_cpu_ratio']:.2f}x",
                           f"{x['matmuls_cpu_ms']:.2f} ms"]


def test_results_from_before_the_floor_show_none():
    assert report.decode_floor({"rows": [{"model": "austen"}], "threads": 2}) == []
