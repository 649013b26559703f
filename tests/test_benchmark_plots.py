"""The learning-curve plots (benchmarks/pretrain_curve.py, batch_signal.py) name each curve by a
readable label in their legends, never by its run directory (e.g. ``paper_cls_separate``)."""

from benchmarks import batch_signal, pretrain_curve

CURVE = [{"pairs_seen": p, "train_seconds": p / 100, "train_cpu_seconds": p / 50,
          "R@1": p / 1e5, "R@10": p / 5e4, "R@100": p / 2e4} for p in (0, 1000, 2000)]


def legend_of(path) -> list:
    import matplotlib.pyplot as plt
    texts = [t.get_text() for t in plt.gcf().axes[0].get_legend().get_texts()]
    plt.close("all")
    assert path.is_file()
    return texts


def test_every_configuration_has_a_label():
    assert set(pretrain_curve.LABELS) == set(pretrain_curve.CONFIGS)
    assert {n.split("_", 1)[1] for n in batch_signal.CONFIGS} == set(batch_signal.LABELS)
    for label in [*pretrain_curve.LABELS.values(), *batch_signal.LABELS.values()]:
        assert "_" not in label, label


def test_legends_show_labels(tmp_path):
    pretrain_curve.plot({"paper_cls_separate": CURVE, "ict_bfs_wlp_512 (long run)": CURVE},
                        tmp_path / "a.png", labels=pretrain_curve.LABELS)
    assert legend_of(tmp_path / "a.png") == [pretrain_curve.LABELS["paper_cls_separate"],
                                             "ict_bfs_wlp_512 (long run)"]
