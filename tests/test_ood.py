"""The shift detector on hand-checkable cases: AUROC equals scikit-learn's, the
Mahalanobis distance equals the formula written out, and the hidden states are what
the output layer reads (the logits are recomputed from them)."""

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from faithbench.metrics.ood import Mahalanobis, auroc, hidden_states


def test_auroc_is_the_mann_whitney_probability_with_ties_at_half():
    rng = np.random.default_rng(0)
    clean, masked = rng.normal(size=300).round(1), rng.normal(0.5, size=200).round(1)  # ties
    expected = roc_auc_score(np.r_[np.zeros(300), np.ones(200)], np.r_[clean, masked])
    assert auroc(clean, masked) == pytest.approx(expected, abs=1e-12)
    assert auroc(np.array([1.0, 2.0]), np.array([3.0, 4.0])) == 1.0
    assert auroc(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.5


def test_mahalanobis_is_the_distance_to_the_nearest_class_mean_under_the_pooled_covariance():
    states = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0],  # class 0, mean (1, 1)
                       [5.0, 5.0], [7.0, 5.0], [5.0, 7.0], [7.0, 7.0]])  # class 1, mean (6, 6)
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    d = Mahalanobis.fit(states, labels)
    np.testing.assert_allclose(d.means, [[1, 1], [6, 6]])
    # centred points are (+-1, +-1) in both classes: covariance diag(1, 1) (+ ridge)
    np.testing.assert_allclose(d.precision, np.eye(2), rtol=1e-5)
    # (1, 3): 4 from class 0's mean; (6, 9): 9 from class 1's; (3.5, 3.5): 12.5 from either
    np.testing.assert_allclose(d.distance(np.array([[1.0, 3.0], [6.0, 9.0], [3.5, 3.5]])),
                               [4.0, 9.0, 12.5], rtol=1e-5)


def test_hidden_states_are_the_output_layers_input(model):
    from faithbench.benchmark.core.vocab import collate

    batch = collate([[5, 6, 7], [8, 9]], ["a", "b"], pad_id=0)
    h = hidden_states(model, [batch])
    assert h.shape == (2, model.out.in_features)
    with torch.no_grad():
        np.testing.assert_allclose(model.out(torch.tensor(h, dtype=torch.float32)).numpy(),
                                   model.logits(batch).numpy(), rtol=1e-5, atol=1e-6)
    assert not model.out._forward_pre_hooks  # the hook is removed again


def test_the_nli_models_output_layer_is_the_last_of_its_mlp():
    from faithbench.benchmark.core.models.pair_classifier import PairAttentionClassifier, PairConfig
    from faithbench.metrics.ood import output_layer

    pair = PairAttentionClassifier(PairConfig(vocab_size=20, num_classes=3))
    assert output_layer(pair) is pair.mlp[-1]
